// The operator under test: the real `sandpit operator` command, run as a child process with the
// cluster script's static operator identity (bound to the ClusterRoles in deploy/rbac.yaml), never
// as admin. Also: installing the CRD, creating SandboxRuns and waiting on them through watches.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { CustomObjectsApi, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { isTerminal, type Phase } from '../../../src/api/run.js';
import type { SandboxRunSpecInput, SandboxRunStatus } from '../../../src/api/v1alpha1/index.js';
import { CRD_FILE, CRD_NAME } from '../../../src/api/v1alpha1/crd.js';
import { isNotFound, type KubeCluster } from '../../support/kube/index.js';
import { REPO_ROOT } from '../../support/kube/env.js';

export const OPERATOR_ROLE = 'sandpit-operator';
export const LEADER_ROLE = 'sandpit-operator-leader-election';
const TEST_BINDING = 'sandpit-operator-tests';

export interface SandboxRunObject extends KubernetesObject {
  spec: SandboxRunSpecInput;
  status?: SandboxRunStatus;
}

const runApi = { group: 'sandpit.dev', version: 'v1alpha1', plural: 'sandboxruns' };

/**
 * Installs (idempotently) what every operator test needs: the CRD from crds/, the ClusterRoles from
 * deploy/rbac.yaml, and a ClusterRoleBinding of the operator role to the static operator user.
 */
export async function installOperatorApi(cluster: KubeCluster): Promise<void> {
  const apply = async (file: string, input?: string): Promise<void> => {
    const res = await cluster.kubectl(['apply', '-f', file], input ? { input } : {});
    assert.equal(res.code, 0, `kubectl apply ${file}: ${res.stderr}`);
  };
  await apply(path.join(REPO_ROOT, CRD_FILE));
  const roles = parseAllDocuments(readFileSync(path.join(REPO_ROOT, 'deploy/rbac.yaml'), 'utf8'))
    .map((d) => d.toJS() as { kind: string })
    .filter((d) => d.kind === 'ClusterRole');
  const binding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: TEST_BINDING, labels: { 'sandpit.dev/managed-by': 'sandpit-tests' } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: OPERATOR_ROLE },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: cluster.userOf('operator') }],
  };
  await apply('-', [...roles, binding].map((d) => stringify(d)).join('---\n'));
  const wait = await cluster.kubectl([
    'wait',
    '--for=condition=Established',
    `crd/${CRD_NAME}`,
    '--timeout=60s',
  ]);
  assert.equal(wait.code, 0, wait.stderr);
}

/** Lets the operator user hold its Lease in `namespace`. */
export async function bindLeaseRole(cluster: KubeCluster, namespace: string): Promise<void> {
  await cluster.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'sandpit-operator-leader-election' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: LEADER_ROLE },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: cluster.userOf('operator') }],
    },
  });
}

export interface OperatorConfig {
  namespace: string;
  identity?: string;
  /** Extra `kubernetes:` settings. */
  kubernetes?: Record<string, unknown>;
  sandbox?: Record<string, unknown>;
}

/** The config every test operator starts from: local images only, the test namespace, short leases. */
export function operatorConfig(c: OperatorConfig): Record<string, unknown> {
  return {
    sandbox: { imageAllowlist: ['sandpit/*'], ...c.sandbox },
    kubernetes: {
      namespaces: [c.namespace],
      imagePullPolicy: 'Never', // nothing may be pulled: the network rule
      leaseNamespace: c.namespace,
      leaseDurationSeconds: 6,
      renewDeadlineSeconds: 4,
      retryPeriodSeconds: 1,
      probePort: 0,
      ...c.kubernetes,
    },
    logging: { level: 'debug' },
  };
}

export interface LogLine {
  msg?: string;
  [key: string]: unknown;
}

/** One `sandpit operator` process. */
export class OperatorProcess {
  readonly identity: string;
  readonly logFile: string;
  readonly lines: LogLine[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;
  private readonly dir: string;
  private waiters: (() => void)[] = [];

  private constructor(child: ChildProcess, identity: string, dir: string) {
    this.child = child;
    this.identity = identity;
    this.dir = dir;
    this.logFile = path.join(dir, 'operator.log');
    const log = createWriteStream(this.logFile);
    let partial = '';
    const onData = (chunk: Buffer): void => {
      log.write(chunk);
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) {
        try {
          this.lines.push(JSON.parse(line) as LogLine);
        } catch {
          this.lines.push({ msg: line });
        }
      }
      for (const w of this.waiters.splice(0)) w();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  static start(cluster: KubeCluster, config: OperatorConfig): OperatorProcess {
    const identity = config.identity ?? `op-${Math.random().toString(16).slice(2, 8)}`;
    const dir = mkdtempSync(path.join(tmpdir(), `sandpit-${identity}-`));
    const configFile = path.join(dir, 'config.yaml');
    writeFileSync(configFile, stringify(operatorConfig(config)));
    const args = [
      '--import',
      'tsx',
      path.join(REPO_ROOT, 'src/cmd/cli.ts'),
      'operator',
      '--config',
      configFile,
      '--kubeconfig',
      cluster.env.identities.operator.kubeconfigPath,
      '--identity',
      identity,
    ];
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('SANDPIT_') && k !== 'KUBECONFIG'),
    );
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    return new OperatorProcess(child, identity, dir);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  find(pred: (l: LogLine) => boolean): LogLine | undefined {
    return this.lines.find(pred);
  }

  /** Waits for a log line matching `pred` (lines already logged count). */
  async waitForLog(pred: (l: LogLine) => boolean, timeoutMs: number, what: string): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.lines.find(pred);
      if (hit) return hit;
      if (!this.running)
        throw new Error(`operator ${this.identity} exited while waiting for ${what}; log: ${this.logFile}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for operator log: ${what}; log: ${this.logFile}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 500));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** The probe server's URL (loopback), from the start-up log line. */
  async probesUrl(): Promise<string> {
    const line = await this.waitForLog((l) => l.msg === 'Started operator', 20_000, 'Started operator');
    return String(line.probes);
  }

  async metrics(): Promise<string> {
    const res = await fetch(`${await this.probesUrl()}/metrics`);
    return res.text();
  }

  /** Sends a signal to this child (by its PID) and waits for it to exit. */
  async kill(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 20_000): Promise<number | null> {
    if (this.running) this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  /** Stops the process and removes its temp dir unless asked to keep it. */
  async stop(keepLogs = false): Promise<void> {
    await this.kill('SIGTERM');
    if (!keepLogs) rmSync(this.dir, { recursive: true, force: true });
  }
}

export function sandboxRun(name: string, spec: SandboxRunSpecInput): SandboxRunObject {
  return { apiVersion: 'sandpit.dev/v1alpha1', kind: 'SandboxRun', metadata: { name }, spec };
}

export function customApi(cluster: KubeCluster): CustomObjectsApi {
  return cluster.kc.makeApiClient(CustomObjectsApi);
}

export async function createRun(
  cluster: KubeCluster,
  namespace: string,
  run: SandboxRunObject,
): Promise<SandboxRunObject> {
  return (await customApi(cluster).createNamespacedCustomObject({
    ...runApi,
    namespace,
    body: run,
  })) as SandboxRunObject;
}

export async function getRun(
  cluster: KubeCluster,
  namespace: string,
  name: string,
): Promise<SandboxRunObject | undefined> {
  try {
    return (await customApi(cluster).getNamespacedCustomObject({
      ...runApi,
      namespace,
      name,
    })) as SandboxRunObject;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** Sets spec.cancel (a JSON patch: client-node's default patch type). */
export async function cancelRun(cluster: KubeCluster, namespace: string, name: string): Promise<void> {
  await customApi(cluster).patchNamespacedCustomObject({
    ...runApi,
    namespace,
    name,
    body: [{ op: 'add', path: '/spec/cancel', value: true }],
  });
}

export const runsPath = (namespace: string): string =>
  `/apis/sandpit.dev/v1alpha1/namespaces/${namespace}/sandboxruns`;

export const isFinished = (r: SandboxRunObject): boolean =>
  r.status?.phase !== undefined && isTerminal(r.status.phase);

/** Waits (by watch) for the run to reach a terminal phase; returns it. */
export function waitForFinished(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  timeoutMs: number,
): Promise<SandboxRunObject> {
  return cluster.waitFor<SandboxRunObject>({ path: runsPath(namespace), name }, (r) => isFinished(r), {
    timeoutMs,
    description: `SandboxRun ${namespace}/${name} to finish`,
  });
}

export function waitForPhase(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  phase: Phase,
  timeoutMs: number,
): Promise<SandboxRunObject> {
  return cluster.waitFor<SandboxRunObject>(
    { path: runsPath(namespace), name },
    (r) => r.status?.phase === phase,
    {
      timeoutMs,
      description: `SandboxRun ${namespace}/${name} to be ${phase}`,
    },
  );
}

/** The value of one sample of a metric in Prometheus text (0 when absent). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_:]+)(\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[4]);
  }
  return 0;
}

export interface Suite {
  cluster: KubeCluster;
  ns: string;
  operator: OperatorProcess;
}

/**
 * Shared set-up for a file of operator tests: the API installed, one namespace, one operator
 * watching it. `fail()` writes diagnostics (namespace events, pods, logs, operator log) on failure.
 */
export async function startSuite(
  cluster: KubeCluster,
  hint: string,
  config: Omit<OperatorConfig, 'namespace'> = {},
): Promise<Suite> {
  await installOperatorApi(cluster);
  const ns = await cluster.createNamespace(hint);
  await bindLeaseRole(cluster, ns);
  const operator = OperatorProcess.start(cluster, { namespace: ns, ...config });
  await operator.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
  return { cluster, ns, operator };
}

export async function stopSuite(
  suite: Suite | undefined,
  failed: boolean,
  diagnostic: (line: string) => void,
): Promise<void> {
  if (!suite) return;
  await suite.operator.stop(failed);
  if (failed) {
    diagnostic(`operator log: ${suite.operator.logFile}`);
    for (const line of (await suite.cluster.diagnostics(suite.ns)).split('\n')) diagnostic(line);
  }
  if (!(failed && process.env.SANDPIT_KEEP_TEST_NAMESPACES === '1'))
    await suite.cluster.deleteNamespace(suite.ns);
}

/** Readies a test's namespace for operators it runs itself: the API installed, the Lease role bound. */
export async function prepareNamespace(cluster: KubeCluster, ns: string): Promise<void> {
  await installOperatorApi(cluster);
  await bindLeaseRole(cluster, ns);
}

/** Collects every pod the watch reports in `namespace` (ADDED names, by run UID label). */
export function recordPods(
  cluster: KubeCluster,
  namespace: string,
): { byRun: Map<string, Set<string>>; stop: () => void } {
  const byRun = new Map<string, Set<string>>();
  const stopper = new AbortController();
  cluster
    .waitFor<V1Pod>(
      {
        path: `/api/v1/namespaces/${namespace}/pods`,
        labelSelector: 'sandpit.dev/managed-by=sandpit-operator',
      },
      (pod) => {
        const uid = pod.metadata?.labels?.['sandpit.dev/run-uid'] ?? '?';
        const names = byRun.get(uid) ?? new Set<string>();
        names.add(pod.metadata?.name ?? '');
        byRun.set(uid, names);
        return false;
      },
      { timeoutMs: 3_600_000, signal: stopper.signal },
    )
    .catch(() => undefined);
  return { byRun, stop: () => stopper.abort() };
}
