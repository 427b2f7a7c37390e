// Where the local test cluster lives: read from `test/env/kube-cluster.sh env` (or from the same
// variables already in the environment, e.g. after `eval "$(test/env/kube-cluster.sh env)"`).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand } from './run.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const CLUSTER_SCRIPT = path.join(REPO_ROOT, 'test/env/kube-cluster.sh');
/** The command a developer or CI runs to bring the cluster up (printed in every "cluster is down" failure). */
export const START_COMMAND = `${process.getuid?.() === 0 ? '' : 'sudo '}test/env/kube-cluster.sh up`;

export type IdentityName = 'admin' | 'operator' | 'gateway';
export const IDENTITY_NAMES: readonly IdentityName[] = ['admin', 'operator', 'gateway'];

export interface ClusterIdentity {
  /** the user name the apiserver sees (static token file) */
  readonly user: string;
  readonly kubeconfigPath: string;
  readonly tokenFile: string;
  readonly token: string;
}

export interface ClusterEnv {
  readonly kubeconfigPath: string;
  readonly apiServer: string;
  readonly caFile: string;
  readonly nodeName: string;
  readonly stateDir: string;
  readonly logDir: string;
  readonly version: string;
  readonly pauseImage: string;
  /** The kubelet's container runtime: its own containerd, whose k8s.io namespace holds the pods. */
  readonly containerd: { readonly address: string; readonly namespace: string };
  readonly helm: string;
  readonly kubectl: string;
  readonly clusterScript: string;
  readonly identities: Readonly<Record<IdentityName, ClusterIdentity>>;
  /** every KEY=value line, as printed */
  readonly vars: Readonly<Record<string, string>>;
}

/** Parse `KEY=value` or `export KEY=value` lines (blank lines and # comments ignored; one pair of surrounding quotes removed). */
export function parseEnvLines(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim().replace(/^export\s+/, '');
    if (line === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    let value = line.slice(eq + 1);
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.endsWith(value[0])) {
      value = value.slice(1, -1);
    }
    out[line.slice(0, eq)] = value;
  }
  return out;
}

export class ClusterEnvError extends Error {
  override name = 'ClusterEnvError';
}

/**
 * Resolve the cluster's environment. If SANDPIT_KUBE_API_SERVER is set, every value comes from
 * process.env (the caller exported `kube-cluster.sh env`); otherwise the script is asked. A plain
 * KUBECONFIG in the environment is never used on its own: it may point at some other cluster.
 */
export async function loadClusterEnv(): Promise<ClusterEnv> {
  let vars: Record<string, string>;
  if (process.env.SANDPIT_KUBE_API_SERVER) {
    vars = Object.fromEntries(
      Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
    );
  } else {
    const res = await runCommand('bash', [CLUSTER_SCRIPT, 'env'], { timeoutMs: 30_000 });
    if (res.code !== 0) {
      throw new ClusterEnvError(`${CLUSTER_SCRIPT} env failed (exit ${res.code}): ${res.stderr.trim()}`);
    }
    vars = parseEnvLines(res.stdout);
  }
  const need = (key: string): string => {
    const v = vars[key];
    if (!v) throw new ClusterEnvError(`${key} missing from the cluster environment`);
    return v;
  };
  const identity = (name: IdentityName): ClusterIdentity => {
    const N = name.toUpperCase();
    const tokenFile = need(`SANDPIT_KUBE_${N}_TOKEN_FILE`);
    let token = vars[`SANDPIT_KUBE_${N}_TOKEN`] ?? '';
    if (!token) {
      try {
        token = readFileSync(tokenFile, 'utf8').trim();
      } catch (e) {
        throw new ClusterEnvError(`no token for ${name}: ${tokenFile} unreadable (${(e as Error).message})`);
      }
    }
    return {
      user: need(`SANDPIT_KUBE_${N}_USER`),
      kubeconfigPath: need(`SANDPIT_KUBE_${N}_KUBECONFIG`),
      tokenFile,
      token,
    };
  };
  const apiServer = need('SANDPIT_KUBE_API_SERVER');
  assertLoopback(apiServer);
  return {
    kubeconfigPath: need('SANDPIT_KUBE_ADMIN_KUBECONFIG'),
    apiServer,
    caFile: need('SANDPIT_KUBE_CA_FILE'),
    nodeName: need('SANDPIT_KUBE_NODE_NAME'),
    stateDir: need('SANDPIT_KUBE_STATE_DIR'),
    logDir: need('SANDPIT_KUBE_LOG_DIR'),
    version: need('SANDPIT_KUBE_VERSION'),
    pauseImage: need('SANDPIT_KUBE_PAUSE_IMAGE'),
    containerd: {
      address: need('SANDPIT_KUBE_CONTAINERD_ADDRESS'),
      namespace: need('SANDPIT_KUBE_CONTAINERD_NAMESPACE'),
    },
    helm: need('HELM'),
    kubectl: need('KUBECTL'),
    clusterScript: vars.SANDPIT_KUBE_CLUSTER_SCRIPT ?? CLUSTER_SCRIPT,
    identities: { admin: identity('admin'), operator: identity('operator'), gateway: identity('gateway') },
    vars,
  };
}

/** Tests only talk to loopback: refuse an API server anywhere else. */
export function assertLoopback(url: string): void {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host)) return;
  throw new ClusterEnvError(`refusing non-loopback API server ${url}: tests only send traffic to loopback`);
}
