// The operator under test: the real `sandpit operator` command, run as a child process with the
// cluster script's static operator identity (bound to the ClusterRoles in deploy/rbac.yaml), never
// as admin. Also: installing the CRD, creating SandboxRuns and waiting on them through watches.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { parseAllDocuments, stringify } from 'yaml';
import { CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { isTerminal, type Phase } from '../../../src/api/run.js';
import { crdName } from '../../../src/api/v1alpha1/group.js';
import { CRDS } from '../../../src/api/v1alpha1/render.js';
import type { SandboxRun, SandboxRunSpecInput } from '../../../src/api/v1alpha1/sandboxrun.js';
import { isNotFound, withCluster, type KubeCluster } from '../../support/kube/index.js';
import { REPO_ROOT } from '../../support/kube/env.js';
import { OperatorProcess, type OperatorConfig } from './operator-process.js';

export { OperatorProcess, operatorConfig, type LogLine, type OperatorConfig } from './operator-process.js';

export const OPERATOR_ROLE = 'sandpit-operator';
export const LEADER_ROLE = 'sandpit-operator-leader-election';
const TEST_BINDING = 'sandpit-operator-tests';

const runApi = { group: 'sandpit.dev', version: 'v1alpha1', plural: 'sandboxruns' };

/**
 * Installs (idempotently) what every operator test needs: the CRDs from crds/, the ClusterRoles from
 * deploy/rbac.yaml, and a ClusterRoleBinding of the operator role to the static operator user.
 */
export async function installOperatorApi(cluster: KubeCluster): Promise<void> {
  await cluster.applyShared(path.join(REPO_ROOT, 'crds'));
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
  await cluster.applyShared('-', [...roles, binding].map((d) => stringify(d)).join('---\n'));
  const wait = await cluster.kubectl([
    'wait',
    '--for=condition=Established',
    ...CRDS.map((def) => `crd/${crdName(def.kind)}`),
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

export function sandboxRun(name: string, spec: SandboxRunSpecInput): SandboxRun {
  return { apiVersion: 'sandpit.dev/v1alpha1', kind: 'SandboxRun', metadata: { name }, spec };
}

export function customApi(cluster: KubeCluster): CustomObjectsApi {
  return cluster.kc.makeApiClient(CustomObjectsApi);
}

export async function createRun(
  cluster: KubeCluster,
  namespace: string,
  run: SandboxRun,
): Promise<SandboxRun> {
  return (await customApi(cluster).createNamespacedCustomObject({
    ...runApi,
    namespace,
    body: run,
  })) as SandboxRun;
}

export async function getRun(
  cluster: KubeCluster,
  namespace: string,
  name: string,
): Promise<SandboxRun | undefined> {
  try {
    return (await customApi(cluster).getNamespacedCustomObject({
      ...runApi,
      namespace,
      name,
    })) as SandboxRun;
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

export const isFinished = (r: SandboxRun): boolean =>
  r.status?.phase !== undefined && isTerminal(r.status.phase);

/** Waits (by watch) for the run to reach a terminal phase; returns it. */
export function waitForFinished(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  timeoutMs: number,
): Promise<SandboxRun> {
  return cluster.waitFor<SandboxRun>({ path: runsPath(namespace), name }, (r) => isFinished(r), {
    timeoutMs,
    description: `SandboxRun ${namespace}/${name} to finish`,
  });
}

/**
 * `kubectl apply` of deploy/samples/python-hello.yaml in `namespace`; waits for the run and checks
 * it succeeded with the sample's greeting. Returns the finished run.
 */
export async function applyHelloSample(
  cluster: KubeCluster,
  namespace: string,
  timeoutMs: number,
): Promise<SandboxRun> {
  const sample = path.join(REPO_ROOT, 'deploy/samples/python-hello.yaml');
  const applied = await cluster.kubectl(['apply', '-n', namespace, '-f', sample]);
  assert.equal(applied.code, 0, applied.stderr);
  const run = await waitForFinished(cluster, namespace, 'python-hello', timeoutMs);
  assert.equal(run.status?.phase, 'Succeeded', JSON.stringify(run.status));
  assert.equal(run.status?.reason, 'Completed');
  assert.equal(run.status?.exitCode, 0);
  assert.match(run.status?.output?.tail ?? '', /hello from python 3\.11\.\d+ in a sandpit\n$/);
  return run;
}

export function waitForPhase(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  phase: Phase,
  timeoutMs: number,
): Promise<SandboxRun> {
  return cluster.waitFor<SandboxRun>({ path: runsPath(namespace), name }, (r) => r.status?.phase === phase, {
    timeoutMs,
    description: `SandboxRun ${namespace}/${name} to be ${phase}`,
  });
}

/**
 * The value of one sample of a metric in Prometheus text. A metric that is not exposed at all (no
 * `# TYPE` line) throws, and so does an unlabelled one with no sample: absent never reads as 0.
 * A labelled counter has no sample for labels it was never counted with: that is a real 0.
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  if (!text.split('\n').some((line) => line.startsWith(`# TYPE ${name} `)))
    throw new Error(`metric ${name} is not exposed`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_:]+)(\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[4]);
  }
  if (Object.keys(labels).length === 0) throw new Error(`metric ${name} has no sample`);
  return 0;
}

/**
 * Creates the run and measures the operator's reaction on this machine, as loaded right now: from
 * the create call to the first status the test sees. Bounds on how late the operator may act
 * after a deadline scale from it (lateBy), so they hold on two loaded cores and stay tight on a
 * quiet machine.
 */
export async function createTimed(cluster: KubeCluster, namespace: string, run: SandboxRun): Promise<number> {
  const started = performance.now();
  await createRun(cluster, namespace, run);
  const name = run.metadata.name;
  await cluster.waitFor<SandboxRun>(
    { path: runsPath(namespace), name },
    (r) => r.status?.phase !== undefined,
    {
      timeoutMs: 60_000,
      description: `SandboxRun ${namespace}/${name} to get a status`,
    },
  );
  return performance.now() - started;
}

/**
 * How late (s) a reaction may come after its deadline, given one measured on the same path (ms):
 * three times that, at least 5 s, and at most 25 s (5 × 5 s, as the Docker tier caps its stretch),
 * so a reaction that never comes still fails.
 */
export const lateBy = (measuredMs: number): number => Math.min(25, Math.max(5, (3 * measuredMs) / 1000));

/** Seconds from the run's creation to its completion, by the cluster's own clocks. */
export function secondsToComplete(run: SandboxRun): number {
  const created = Date.parse(run.metadata.creationTimestamp ?? '');
  return (Date.parse(run.status?.completionTime ?? '') - created) / 1000;
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
  try {
    await operator.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
  } catch (e) {
    // An operator that never synced must not keep the test process alive.
    await operator.stop(true);
    throw e;
  }
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

export interface SuiteHandle {
  /** The running suite (set by the before hook). */
  readonly suite: Suite;
  /** A test of this suite (120 s); a failure makes the suite write its diagnostics at the end. */
  it: (name: string, body: () => Promise<void>) => void;
}

/** A test() with a timeout that calls `onFailure` when it fails (to write diagnostics at the end). */
export function failureMarkingTest(
  timeoutMs: number,
  onFailure: () => void,
): (name: string, body: (t: TestContext) => Promise<void>) => void {
  return (name, body) => {
    test(name, { timeout: timeoutMs }, async (t) => {
      try {
        await body(t);
      } catch (e) {
        onFailure();
        throw e;
      }
    });
  };
}

/** Call inside describe(): starts the suite before its tests and stops it after them. */
export function operatorSuite(hint: string, config: Omit<OperatorConfig, 'namespace'> = {}): SuiteHandle {
  let current: Suite | undefined;
  let failed = false;
  before(async () => {
    current = await startSuite(await withCluster(), hint, config);
  });
  after(async () => {
    await stopSuite(current, failed, (l) => process.stderr.write(`# ${l}\n`));
  });
  return {
    get suite(): Suite {
      if (!current) throw new Error(`the ${hint} suite did not start`);
      return current;
    },
    it: failureMarkingTest(120_000, () => (failed = true)),
  };
}

/** The pods of a run, found by its run-uid label. */
export async function podsOf(s: Pick<Suite, 'cluster' | 'ns'>, run: SandboxRun): Promise<V1Pod[]> {
  const uid = run.metadata?.uid ?? '';
  return (
    await s.cluster.core.listNamespacedPod({ namespace: s.ns, labelSelector: `sandpit.dev/run-uid=${uid}` })
  ).items;
}

/** Readies a test's namespace for operators it runs itself: the API installed, the Lease role bound. */
export async function prepareNamespace(cluster: KubeCluster, ns: string): Promise<void> {
  await installOperatorApi(cluster);
  await bindLeaseRole(cluster, ns);
}

/**
 * Collects every operator pod the watch reports in `namespace`: pod names by run UID and by run
 * name (a claimed pool pod counts from its claim), and when each run's pod was first seen finished.
 */
export function recordPods(
  cluster: KubeCluster,
  namespace: string,
): {
  byRun: Map<string, Set<string>>;
  byRunName: Map<string, Set<string>>;
  finishedAt: Map<string, number>;
  stop: () => void;
} {
  const byRun = new Map<string, Set<string>>();
  const byRunName = new Map<string, Set<string>>();
  const finishedAt = new Map<string, number>();
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
        const run = pod.metadata?.labels?.['sandpit.dev/run'];
        if (run) byRunName.set(run, (byRunName.get(run) ?? new Set<string>()).add(pod.metadata?.name ?? ''));
        const phase = pod.status?.phase;
        if ((phase === 'Succeeded' || phase === 'Failed') && !finishedAt.has(uid))
          finishedAt.set(uid, performance.now());
        return false;
      },
      { timeoutMs: 3_600_000, signal: stopper.signal },
    )
    .catch(() => undefined);
  return { byRun, byRunName, finishedAt, stop: () => stopper.abort() };
}

/** Whether the operator has logged that it acquired the Lease. */
export const acquiredLease = (op: OperatorProcess): boolean =>
  op.find((l) => l.msg === 'Acquired Lease') !== undefined;

/**
 * Of operators started together, the one that acquired the Lease (within 30 s) once its caches
 * synced, and the other.
 */
export async function leaderOf(
  ops: readonly OperatorProcess[],
): Promise<{ leader: OperatorProcess; standby: OperatorProcess }> {
  const deadline = Date.now() + 30_000;
  while (!ops.some(acquiredLease) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const leader = ops.find(acquiredLease);
  assert.ok(leader, 'one operator acquired the Lease');
  await leader.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'leader synced');
  return { leader, standby: ops.find((o) => o !== leader)! };
}
