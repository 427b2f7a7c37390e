// The local test cluster (test/env/kube-cluster.sh) as seen from a test: clients per identity,
// a fresh namespace per test, helm/kubectl runners, and diagnostics when a test fails.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import {
  ApiException,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  RbacAuthorizationV1Api,
  VersionApi,
  type V1Pod,
} from '@kubernetes/client-node';
import { collectDiagnostics } from './diagnostics.js';
import { type ClusterEnv, type IdentityName, loadClusterEnv, REPO_ROOT, START_COMMAND } from './env.js';
import { runCommand, type RunOptions, type RunResult } from './run.js';
import { withTimeout } from '../../../src/shared/time.js';
import { waitFor, type WaitOptions, type Watched, type WatchEventType, type WatchTarget } from './wait.js';

/** Label on every namespace the tests create. */
export const TEST_NAMESPACE_LABEL = 'sandpit.dev/test-namespace';

/** The cluster is not there (or not healthy): the message says how to start it. Tests fail on it; they never skip. */
export class ClusterUnavailableError extends Error {
  override name = 'ClusterUnavailableError';
}

export class KubeCluster {
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly rbac: RbacAuthorizationV1Api;
  readonly objects: KubernetesObjectApi;
  readonly env: ClusterEnv;
  private helmHome: string | undefined;

  constructor(env: ClusterEnv) {
    this.env = env;
    this.kc = this.kubeConfigFor('admin');
    this.core = this.kc.makeApiClient(CoreV1Api);
    this.rbac = this.kc.makeApiClient(RbacAuthorizationV1Api);
    this.objects = KubernetesObjectApi.makeApiClient(this.kc);
  }

  /**
   * A KubeConfig that authenticates as one of the static-token identities: `admin` (system:masters),
   * `operator` / `gateway` (plain users with no rights until a test binds a Role to them).
   */
  kubeConfigFor(identity: IdentityName, namespace = 'default'): KubeConfig {
    const id = this.env.identities[identity];
    const kc = new KubeConfig();
    // distinct user names per identity: client-node caches credentials by user name
    kc.loadFromOptions({
      clusters: [
        { name: 'sandpit-kube', server: this.env.apiServer, caFile: this.env.caFile, skipTLSVerify: false },
      ],
      users: [{ name: id.user, token: id.token }],
      contexts: [{ name: `sandpit-kube-${identity}`, cluster: 'sandpit-kube', user: id.user, namespace }],
      currentContext: `sandpit-kube-${identity}`,
    });
    return kc;
  }

  /** The user name the apiserver sees for an identity (for RoleBinding subjects). */
  userOf(identity: IdentityName): string {
    return this.env.identities[identity].user;
  }

  /** Create a namespace for one test (name `t-<slug>-<random>`), labelled for clean-up. */
  async createNamespace(hint = 'test'): Promise<string> {
    const slug = hint
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40)
      .replace(/-+$/g, '');
    const name = `t-${slug || 'test'}-${randomBytes(3).toString('hex')}`;
    await this.core.createNamespace({
      body: {
        metadata: {
          name,
          labels: { [TEST_NAMESPACE_LABEL]: 'true', 'sandpit.dev/managed-by': 'sandpit-tests' },
        },
      },
    });
    // Pods cannot be created before the namespace's default ServiceAccount exists. Right after an
    // apiserver restart the controller-manager's informers re-list with a backoff of up to 30 s
    // (their requests were refused until RBAC was loaded), so the bound is well past that.
    await waitFor(
      this.kc,
      { path: `/api/v1/namespaces/${name}/serviceaccounts`, name: 'default' },
      () => true,
      {
        timeoutMs: 90_000,
        description: `ServiceAccount ${name}/default (created by kube-controller-manager)`,
      },
    );
    return name;
  }

  /** Delete a test namespace without waiting; its pods are removed at once (grace period 0). */
  async deleteNamespace(name: string): Promise<void> {
    try {
      await this.core.deleteCollectionNamespacedPod({ namespace: name, gracePeriodSeconds: 0 });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    try {
      await this.core.deleteNamespace({ name, propagationPolicy: 'Background' });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  createPod(namespace: string, pod: V1Pod): Promise<V1Pod> {
    return this.core.createNamespacedPod({ namespace, body: pod });
  }

  /** Read a container's log through the API (pods/log). */
  async podLog(namespace: string, name: string, container?: string): Promise<string> {
    return String(await this.core.readNamespacedPodLog({ namespace, name, container }));
  }

  /** waitFor() with the admin client. */
  waitFor<T extends Watched>(
    target: WatchTarget,
    predicate: (obj: T, type: WatchEventType) => boolean,
    opts: WaitOptions,
  ): Promise<T> {
    return waitFor<T>(this.kc, target, predicate, opts);
  }

  /** kubectl (the cached 1.35 client from the npm layer) as admin. */
  kubectl(args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
    return runCommand(this.env.kubectl, args, {
      ...opts,
      env: { ...process.env, KUBECONFIG: this.env.kubeconfigPath, ...opts.env },
    });
  }

  /**
   * `kubectl apply -f FILE` (`-` reads `input`) of objects every file shares (CRDs, ClusterRoles):
   * two files at once may both create what a fresh cluster lacks, or update it together, and one
   * then fails (AlreadyExists, Conflict); applying again settles it. Fails the test otherwise.
   */
  async applyShared(file: string, input?: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const res = await this.kubectl(['apply', '-f', file], input === undefined ? {} : { input });
      if (res.code === 0) return;
      if (attempt === 3 || !/AlreadyExists|already exists|Conflict|has been modified/.test(res.stderr)) {
        throw new Error(`kubectl apply -f ${file}: ${res.stderr}`);
      }
    }
  }

  /** helm as admin, with its config/cache/data in a private temp dir. */
  helm(args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
    if (this.helmHome === undefined) {
      const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-helm-'));
      process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
      this.helmHome = dir;
    }
    const home = this.helmHome;
    return runCommand(this.env.helm, args, {
      ...opts,
      env: {
        ...process.env,
        KUBECONFIG: this.env.kubeconfigPath,
        HELM_CACHE_HOME: path.join(home, 'cache'),
        HELM_CONFIG_HOME: path.join(home, 'config'),
        HELM_DATA_HOME: path.join(home, 'data'),
        ...opts.env,
      },
    });
  }

  /** Run test/env/kube-cluster.sh <args>. */
  script(args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
    return runCommand('bash', [this.env.clusterScript, ...args], {
      timeoutMs: 30 * 60_000,
      cwd: REPO_ROOT,
      ...opts,
    });
  }

  /** The PID the cluster script recorded for one of its components (`etcd`, `kube-apiserver`, …). */
  async componentPid(component: string): Promise<number> {
    return Number((await readFile(path.join(this.env.stateDir, 'run', `${component}.pid`), 'utf8')).trim());
  }

  /**
   * Sends `signal` to a component the cluster script started, by its recorded PID, and waits (up
   * to 10 s) for it to exit; `script(['up'])` starts it again. Returns the PID it had.
   */
  async stopComponent(component: string, signal: NodeJS.Signals): Promise<number> {
    const pid = await this.componentPid(component);
    if (!processAlive(pid)) throw new Error(`${component} (pid ${pid}) is not running`);
    process.kill(pid, signal);
    // Not our child: no exit event to wait on.
    for (let i = 0; processAlive(pid) && i < 200; i++) await new Promise((r) => setTimeout(r, 50));
    if (processAlive(pid)) throw new Error(`${component} (pid ${pid}) still runs 10 s after ${signal}`);
    return pid;
  }

  /** `ctr` against the kubelet's containerd, in the pods' namespace (k8s.io). */
  ctr(args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
    const { address, namespace } = this.env.containerd;
    return runCommand('ctr', ['--address', address, '--namespace', namespace, ...args], {
      timeoutMs: 30_000,
      ...opts,
    });
  }

  /** Fails unless the node's containerd has `image` (nothing can be pulled here). */
  async requireNodeImage(image: string): Promise<void> {
    const ref = fullImageRef(image);
    const res = await this.ctr(['images', 'ls', '-q', `name==${ref}`]);
    if (res.code !== 0 || res.stdout.trim() !== ref) {
      throw new Error(
        `image ${ref} is not in the node's containerd (${res.stderr.trim() || 'not listed'}): build it with ` +
          'images/build.sh, then test/env/kube-cluster.sh images (or up) copies it from dockerd',
      );
    }
  }

  diagnostics(namespace: string): Promise<string> {
    return collectDiagnostics(
      { kc: this.kc, nodeName: this.env.nodeName, logDir: this.env.logDir },
      namespace,
    );
  }
}

/** Whether a process exists (signal 0). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A Docker image name as containerd stores it: python:3.11 -> docker.io/library/python:3.11. */
export function fullImageRef(image: string): string {
  const tagged = image.includes('@') || image.split('/').at(-1)!.includes(':') ? image : `${image}:latest`;
  if (!tagged.includes('/')) return `docker.io/library/${tagged}`;
  const first = tagged.split('/')[0]!;
  return /[.:]/.test(first) || first === 'localhost' ? tagged : `docker.io/${tagged}`;
}

let cached: Promise<KubeCluster> | undefined;

/**
 * The running test cluster, checked once per process: the API answers on loopback and the node is
 * Ready. Otherwise this throws ClusterUnavailableError with the exact command that starts it.
 */
export function withCluster(): Promise<KubeCluster> {
  cached ??= connect().catch((e: unknown) => {
    cached = undefined;
    throw e;
  });
  return cached;
}

async function connect(): Promise<KubeCluster> {
  const unavailable = (why: string): ClusterUnavailableError =>
    new ClusterUnavailableError(
      `the Kubernetes test cluster is not available: ${why}\n` +
        `Start it with:\n  ${START_COMMAND}\n(check it with: test/env/kube-cluster.sh status; see test/env/README.md)`,
    );
  let env: ClusterEnv;
  try {
    env = await loadClusterEnv();
  } catch (e) {
    throw unavailable((e as Error).message);
  }
  const cluster = new KubeCluster(env);
  try {
    await withTimeout(
      cluster.kc.makeApiClient(VersionApi).getCode(),
      10_000,
      `GET ${env.apiServer}/version: no answer in 10 s`,
    );
  } catch (e) {
    throw unavailable(`API server ${env.apiServer} does not answer (${(e as Error).message})`);
  }
  let ready: string;
  try {
    const node = await withTimeout(
      cluster.core.readNode({ name: env.nodeName }),
      10_000,
      `GET node ${env.nodeName}: no answer in 10 s`,
    );
    const cond = node.status?.conditions?.find((c) => c.type === 'Ready');
    ready =
      cond?.status === 'True'
        ? ''
        : `node ${env.nodeName} is not Ready (${cond?.reason ?? 'no Ready condition'}: ${cond?.message ?? ''})`;
  } catch (e) {
    ready = `node ${env.nodeName} not found (${(e as Error).message})`;
  }
  if (ready) throw unavailable(ready);
  return cluster;
}

export interface KubeTestContext {
  t: TestContext;
  cluster: KubeCluster;
  /** a namespace created for this test and deleted after it */
  ns: string;
}

/**
 * Wrap a node:test body: connect to the cluster (failing with the start command if it is down),
 * create a fresh namespace, run the body, and on failure attach diagnostics (events, pod statuses
 * and logs, node conditions, component log tails) before the namespace is deleted.
 * SANDPIT_KEEP_TEST_NAMESPACES=1 keeps namespaces of failed tests for inspection.
 *
 *   test('runs python', { timeout: 120_000 }, kubeTest(async ({ cluster, ns }) => { ... }));
 */
export function kubeTest(body: (ctx: KubeTestContext) => Promise<void>): (t: TestContext) => Promise<void> {
  return async (t: TestContext) => {
    const cluster = await withCluster();
    const ns = await cluster.createNamespace(t.name);
    let failed = true;
    try {
      await body({ t, cluster, ns });
      failed = false;
    } catch (e) {
      await reportFailure(t, cluster, ns);
      throw e;
    } finally {
      if (!(failed && process.env.SANDPIT_KEEP_TEST_NAMESPACES === '1')) {
        await cluster
          .deleteNamespace(ns)
          .catch((e: unknown) => t.diagnostic(`deleting namespace ${ns} failed: ${String(e)}`));
      }
    }
  };
}

async function reportFailure(t: TestContext, cluster: KubeCluster, ns: string): Promise<void> {
  const text = await cluster.diagnostics(ns).catch((e: unknown) => `diagnostics failed: ${String(e)}`);
  const dir = process.env.SANDPIT_TEST_ARTIFACTS_DIR ?? path.join(tmpdir(), 'sandpit-test-artifacts');
  const file = path.join(dir, `kube-${ns}.txt`);
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(file, text);
    t.diagnostic(`cluster diagnostics for ${ns} written to ${file}`);
  } catch {
    // fall through: the diagnostics still go to the test output
  }
  for (const line of text.split('\n')) t.diagnostic(line);
}

export function isNotFound(e: unknown): boolean {
  return e instanceof ApiException && e.code === 404;
}

/** HTTP status of a client-node error (ApiException), if any. */
export function httpStatus(e: unknown): number | undefined {
  return e instanceof ApiException ? e.code : undefined;
}
