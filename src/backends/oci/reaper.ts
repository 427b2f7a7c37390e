/**
 * Removes what dead sandpit processes left behind on the OCI backend: containers in sandpit's own
 * runtime roots (stopped ones kept for their cgroup, or running ones of a gateway killed with
 * SIGKILL), bundles, and cgroup folders, each only when its owner (the `sandpit.dev/owner`
 * annotation, host:pid:starttime) is gone or its expiry passed. Everything it looks at has a name
 * only sandpit makes (layout.ts); it never touches anything else. It names the egress gate
 * directories that kept containers mount, so that the backend sweeps only the others.
 */
import { execFile } from 'node:child_process';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ownerAlive } from '../docker/owner.js';
import { LABELS } from '../docker/labels.js';
import {
  bundleDir,
  bundlesDir,
  CGROUP_CONTROLLERS,
  CGROUP_PARENT,
  isOurs,
  type OciRuntime,
} from './layout.js';
import { removeCgroups, removeContainer, runtimeCommand, type OciHost } from './oci-container.js';
import { runtimeInvocation } from './runtime-command.js';

const run = promisify(execFile);

export interface OciReapOptions {
  /** Containers this process runs: never touched. */
  live?: ReadonlySet<string>;
  now?: number;
}

export interface OciReapResult {
  /** Ids of the containers (or bundles) removed. */
  removed: string[];
  /** The root file systems that kept containers still use. */
  rootsInUse: Set<string>;
  /** The egress gate directories kept containers mount (their sockets are not to be swept). */
  egressDirsInUse: Set<string>;
}

interface Bundle {
  annotations: Record<string, string>;
  root: string | undefined;
}

export async function reapOci(host: OciHost, options: OciReapOptions = {}): Promise<OciReapResult> {
  const now = options.now ?? Date.now();
  const live = options.live ?? new Set<string>();
  const result: OciReapResult = { removed: [], rootsInUse: new Set(), egressDirsInUse: new Set() };
  const known = new Set<string>();
  for (const runtime of ['runc', 'runsc'] as const) {
    for (const id of await listContainers(host, runtime)) {
      known.add(id);
      if (live.has(id) || (await kept(host, id, now, result))) continue;
      await removeContainer(host, runtime, id, async () => {
        await runtimeCommand(host, runtime, { kind: 'kill', id });
      });
      result.removed.push(id);
    }
  }
  for (const id of await ours(bundlesDir(host.layout))) {
    if (known.has(id) || live.has(id) || (await kept(host, id, now, result))) continue;
    await rm(bundleDir(host.layout, id), { recursive: true, force: true });
    await removeCgroups(host.layout, id);
    result.removed.push(id);
  }
  await reapCgroups(host, new Set([...known, ...live]), result);
  return result;
}

/** Whether the container's bundle says a live owner keeps it (its root and egress gate are then in use). */
async function kept(host: OciHost, id: string, now: number, result: OciReapResult): Promise<boolean> {
  const bundle = await readBundle(host, id);
  if (!bundle || abandoned(bundle, now)) return false;
  if (bundle.root) result.rootsInUse.add(bundle.root);
  const egressDir = bundle.annotations[LABELS.egressDir];
  if (egressDir) result.egressDirsInUse.add(egressDir);
  return true;
}

/** Its owner is gone (on this host) or its expiry passed; a bundle without an owner is nobody's. */
function abandoned(bundle: Bundle, now: number): boolean {
  const owner = bundle.annotations[LABELS.owner];
  const expires = Number(bundle.annotations[LABELS.expires] ?? Infinity);
  return owner === undefined || !ownerAlive(owner) || expires < now;
}

/** Cgroup folders of sandpit containers that exist nowhere else (an empty one is removed; a busy one stays). */
async function reapCgroups(host: OciHost, keep: ReadonlySet<string>, result: OciReapResult): Promise<void> {
  const ids = new Set<string>();
  for (const c of CGROUP_CONTROLLERS) {
    for (const id of await ours(join(host.layout.cgroupRoot, c, CGROUP_PARENT))) ids.add(id);
  }
  for (const id of ids) {
    if (keep.has(id) || (await kept(host, id, Date.now(), result))) continue;
    await removeCgroups(host.layout, id);
    if (!result.removed.includes(id)) result.removed.push(id);
  }
}

async function ours(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory() && isOurs(e.name)).map((e) => e.name);
}

/** The ids of sandpit's containers in the runtime's (sandpit-only) root; none when it is not installed. */
async function listContainers(host: OciHost, runtime: OciRuntime): Promise<string[]> {
  const { file, args } = runtimeInvocation(runtime, { kind: 'list' }, host);
  try {
    const { stdout } = await run(file, args, { timeout: 30_000 });
    const list = JSON.parse(stdout.trim() || '[]') as { id?: unknown }[] | null;
    return (list ?? []).map((c) => String(c.id)).filter(isOurs);
  } catch {
    return [];
  }
}

async function readBundle(host: OciHost, id: string): Promise<Bundle | undefined> {
  try {
    const spec = JSON.parse(await readFile(join(bundleDir(host.layout, id), 'config.json'), 'utf8')) as {
      annotations?: Record<string, string>;
      root?: { path?: string };
    };
    return { annotations: spec.annotations ?? {}, root: spec.root?.path };
  } catch {
    return undefined;
  }
}
