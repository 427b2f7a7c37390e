// The Kubernetes side of the faults tier: a real operator process (restartable), the gateway's
// service over the Kubernetes backend as the static gateway identity, with an audit file, and
// what every fault case checks after: each run ended with a result or a typed error, every run
// the gateway made has its audit record, and nothing is left once the runs' TTL is over.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { V1Pod } from '@kubernetes/client-node';
import type { RunRequestInput, RunResult } from '../../src/api/run.js';
import {
  LABEL_MANAGED_BY,
  LABEL_POOL_POD,
  LABEL_RUN,
  MANAGED_BY_OPERATOR,
  POOL_POD_CLAIMED,
} from '../../src/api/v1alpha1/labels.js';
import type { SandboxRun } from '../../src/api/v1alpha1/sandboxrun.js';
import type { KubernetesBackend } from '../../src/backends/kubernetes/kubernetes-backend.js';
import { SandpitService } from '../../src/gateway/service.js';
import { createAuditTrail, type AuditTrail } from '../../src/observability/audit-trail.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { isAppError } from '../../src/shared/errors.js';
import { readAuditFile } from '../support/audit.js';
import { withCluster, type KubeCluster } from '../support/kube/index.js';
import { bindGatewayRbac, gatewayBackend } from '../contract/kube-gateway.js';
import { CONTRACT_SANDBOX_CONFIG, contractPolicy, PRINCIPAL } from '../contract/target.js';
import {
  customApi,
  getRun,
  OperatorProcess,
  recordPods,
  runsPath,
  startSuite,
  stopSuite,
  type LogLine,
} from '../integration/kubernetes/operator-harness.js';

/** Finished runs' SandboxRuns (and so their pods) go this soon: the clean-up is checked, not assumed. */
export const TTL_SECONDS = 3;
/**
 * The TTL where the apiserver goes away: longer than the gateway's longest wait between watch
 * attempts (src/kube/watch.ts, WATCH_BACKOFF: 10 s) with room for a loaded machine, so that a run
 * which ends during the outage, or as the apiserver comes back, is still there when the gateway
 * watches it again (at 15 s, a run with the Docker lane's tiers beside it was deleted first).
 */
export const OUTAGE_TTL_SECONDS = 30;

/** A run made through the gateway: its id, its live output so far, and how it ended. */
export interface GatewayRun {
  runId: string;
  /** The live output, as the gateway relayed it. */
  text(): string;
  /** Resolves once `needle` has come through the live output. */
  saw(needle: string): Promise<void>;
  /** The result, or the typed error the run ended with. */
  ended: Promise<RunResult | Error>;
}

export interface KubeFaults {
  cluster: KubeCluster;
  ns: string;
  /** The operator now (a killed one is replaced by restartOperator). */
  readonly operator: OperatorProcess;
  backend: KubernetesBackend;
  service: SandpitService;
  /** The gateway's log lines (debug), parsed. */
  gatewayLog: LogLine[];
  /** Every operator pod seen in the namespace, by run (recordPods). */
  pods: ReturnType<typeof recordPods>;
  /** The last version of every SandboxRun seen in the namespace (it outlives the TTL's deletion). */
  lastSeen: Map<string, SandboxRun>;
  /** Every run made through the gateway. */
  runs: GatewayRun[];
  /** The TTL the gateway sets on its runs. */
  ttlSeconds: number;
  /** Starts a run through the gateway's service. */
  run(request: RunRequestInput): Promise<GatewayRun>;
  /** SIGKILLs the operator (by its PID) and starts another, which has synced when this resolves. */
  restartOperator(): Promise<OperatorProcess>;
  /**
   * Waits until every run has ended: each must have finished (a result, not an error), and have
   * its one audit record, which says how it ended. The results.
   */
  results(runs: readonly GatewayRun[]): Promise<RunResult[]>;
  /** No pod of the runs is pending or running. */
  expectNothingRunning(runs: readonly GatewayRun[]): Promise<void>;
  /**
   * Waits (TTL + 60 s) until none of `runs`' SandboxRuns and pods exist, no claimed pool pod is
   * left in the namespace, and no Sandbox was made. Returns how long that took (ms).
   */
  expectNothingLeft(runs: readonly GatewayRun[]): Promise<number>;
  stop(failed: boolean): Promise<void>;
}

/** A logger that keeps every line it writes (debug and up), parsed. */
function capturingLogger(lines: LogLine[]) {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        try {
          lines.push(JSON.parse(line) as LogLine);
        } catch {
          lines.push({ msg: line });
        }
      }
      done();
    },
  });
  return pino({ level: 'debug', base: { svc: 'gateway' } }, sink);
}

/** Records the last version of every SandboxRun in the namespace (by watch), until stopped. */
function recordRuns(
  cluster: KubeCluster,
  ns: string,
): { lastSeen: Map<string, SandboxRun>; stop: () => void } {
  const lastSeen = new Map<string, SandboxRun>();
  const stopper = new AbortController();
  cluster
    .waitFor<SandboxRun>(
      { path: runsPath(ns) },
      (run) => {
        lastSeen.set(run.metadata.name ?? '', run);
        return false;
      },
      { timeoutMs: 3_600_000, signal: stopper.signal },
    )
    .catch(() => undefined);
  return { lastSeen, stop: () => stopper.abort() };
}

export async function startKubeFaults(hint: string, ttlSeconds = TTL_SECONDS): Promise<KubeFaults> {
  const cluster = await withCluster();
  const suite = await startSuite(cluster, hint, { sandbox: CONTRACT_SANDBOX_CONFIG, identity: `${hint}-0` });
  const { ns } = suite;
  const operators = [suite.operator];
  await bindGatewayRbac(cluster, ns);
  const gatewayLog: LogLine[] = [];
  const logger = capturingLogger(gatewayLog);
  const backend = gatewayBackend(cluster, ns, { ttlSecondsAfterFinished: ttlSeconds, logger });
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-faults-audit-'));
  const auditFile = path.join(dir, 'audit.jsonl');
  const audit: AuditTrail = createAuditTrail({
    logger,
    file: { path: auditFile, maxBytes: 16 * 1024 * 1024, maxFiles: 1, flushIntervalMs: 0 },
  });
  await audit.open();
  const service = new SandpitService({
    backend,
    policy: contractPolicy([]),
    logger,
    metrics: createMetrics(),
    audit,
    slots: { maxConcurrent: 8, maxQueued: 16 },
  });
  const pods = recordPods(cluster, ns);
  const runRecorder = recordRuns(cluster, ns);
  const runs: GatewayRun[] = [];
  const operatorPods = async (): Promise<V1Pod[]> =>
    (
      await cluster.core.listNamespacedPod({
        namespace: ns,
        labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY_OPERATOR}`,
      })
    ).items;

  const f: KubeFaults = {
    cluster,
    ns,
    get operator() {
      return operators.at(-1)!;
    },
    backend,
    service,
    gatewayLog,
    pods,
    lastSeen: runRecorder.lastSeen,
    runs,
    ttlSeconds,

    async run(request) {
      let text = '';
      const waiters: { needle: string; resolve: () => void }[] = [];
      const handle = await service.runs.start(request, PRINCIPAL, {
        onOutput: (chunk) => {
          text += chunk.data.toString('utf8');
          for (const w of waiters.filter((x) => text.includes(x.needle))) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve();
          }
        },
      });
      const run: GatewayRun = {
        runId: handle.runId,
        text: () => text,
        saw: (needle) =>
          text.includes(needle)
            ? Promise.resolve()
            : new Promise((resolve) => waiters.push({ needle, resolve })),
        ended: handle.result.then(
          (r) => r,
          (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
        ),
      };
      runs.push(run);
      return run;
    },

    async restartOperator() {
      const old = operators.at(-1)!;
      await old.kill('SIGKILL');
      const next = OperatorProcess.start(cluster, {
        namespace: ns,
        identity: `${hint}-${operators.length}`,
        sandbox: CONTRACT_SANDBOX_CONFIG,
      });
      operators.push(next);
      await next.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'the restarted operator synced');
      return next;
    },

    async results(list) {
      const ended = await Promise.all(list.map((r) => r.ended));
      const results = ended.map((e, i) => {
        // A fault may end a run with a typed error; here, each must finish (the cases say why).
        if (e instanceof Error)
          assert.fail(
            `run ${list[i]!.runId} ended with ${isAppError(e) ? `${e.code}: ` : 'an untyped error: '}${e.message}`,
          );
        return e;
      });
      // The gateway records a run before it hands on the result: each record is written by now.
      await audit.flush();
      const records = readAuditFile(auditFile);
      for (const result of results) {
        const mine = records.filter((r) => r.event === 'run' && r.runId === result.runId);
        assert.equal(mine.length, 1, `one audit record of run ${result.runId}, found ${mine.length}`);
        const record = mine[0]!;
        assert.ok(record.event === 'run');
        assert.deepEqual(
          {
            principal: record.principal,
            backend: record.backend,
            phase: record.outcome.phase,
            exitCode: record.exitCode,
          },
          {
            principal: PRINCIPAL.name,
            backend: 'kubernetes',
            phase: result.phase,
            exitCode: result.exitCode,
          },
          `the audit record of ${result.runId} says how it ended`,
        );
      }
      return results;
    },

    async expectNothingRunning(list) {
      const ids = new Set(list.map((r) => r.runId));
      const running = (await operatorPods())
        .filter((p) => ids.has(p.metadata?.labels?.[LABEL_RUN] ?? ''))
        .filter((p) => p.status?.phase === 'Running' || p.status?.phase === 'Pending')
        .map((p) => `${p.metadata?.name} (${p.status?.phase}) of ${p.metadata?.labels?.[LABEL_RUN]}`);
      assert.deepEqual(running, [], 'pods of finished runs still running');
    },

    async expectNothingLeft(list) {
      const started = performance.now();
      const ids = new Set(list.map((r) => r.runId));
      const left = async (): Promise<string[]> => {
        const found: string[] = [];
        for (const id of ids) if (await getRun(cluster, ns, id)) found.push(`SandboxRun ${id}`);
        for (const pod of await operatorPods()) {
          const labels = pod.metadata?.labels ?? {};
          if (ids.has(labels[LABEL_RUN] ?? '') || labels[LABEL_POOL_POD] === POOL_POD_CLAIMED)
            found.push(`pod ${pod.metadata?.name} (${pod.status?.phase}) of ${labels[LABEL_RUN] ?? '?'}`);
        }
        const sandboxes = (await customApi(cluster).listNamespacedCustomObject({
          group: 'sandpit.dev',
          version: 'v1alpha1',
          plural: 'sandboxes',
          namespace: ns,
        })) as { items: unknown[] };
        if (sandboxes.items.length > 0) found.push(`${sandboxes.items.length} Sandboxes`);
        return found;
      };
      const deadline = Date.now() + (ttlSeconds + 60) * 1000;
      let now = await left();
      while (now.length > 0) {
        if (Date.now() > deadline) assert.fail(`left after the TTL: ${now.join(', ')}`);
        await new Promise((r) => setTimeout(r, 250));
        now = await left();
      }
      return performance.now() - started;
    },

    async stop(failed) {
      pods.stop();
      runRecorder.stop();
      await service.shutdown();
      const current = operators.at(-1)!;
      for (const op of operators.slice(0, -1)) {
        if (failed) process.stderr.write(`# operator ${op.identity} log: ${op.logFile}\n`);
        await op.stop(failed);
      }
      await stopSuite({ cluster, ns, operator: current }, failed, (l) => process.stderr.write(`# ${l}\n`));
      if (failed) {
        const log = path.join(dir, 'gateway.log');
        writeFileSync(log, gatewayLog.map((l) => JSON.stringify(l)).join('\n'));
        process.stderr.write(`# audit file: ${auditFile}; gateway log: ${log}\n`);
      } else rmSync(dir, { recursive: true, force: true });
    },
  };
  return f;
}
