/**
 * Test support for the oci tier: the OCI backend on this machine (root, cgroups, runc, runsc), with
 * the sandbox images of the local engine, or a loud failure that says how to get them. Never skips.
 */
import { readdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { OciBackend, type OciBackendOptions } from '../../src/backends/oci/oci-backend.js';
import {
  bundlesDir,
  CGROUP_CONTROLLERS,
  CGROUP_PARENT,
  type OciLayout,
} from '../../src/backends/oci/layout.js';
import { BUILTIN_TEMPLATES } from '../../src/policy/templates.js';
import { requireDocker, START_HINT } from './docker.js';

export const OCI_LAYOUT: OciLayout = {
  runDir: process.env.SANDPIT_OCI_RUN_DIR ?? '/run/sandpit/oci',
  rootfsDir:
    process.env.SANDPIT_OCI_ROOTFS_DIR ??
    join(process.env.HOME || homedir(), '.cache', 'sandpit', 'oci', 'rootfs'),
  cgroupRoot: '/sys/fs/cgroup',
};

/** The oci backend on this machine (`extra`: e.g. the egress proxy's gates). */
export async function makeOciBackend(extra: Partial<OciBackendOptions> = {}): Promise<OciBackend> {
  const docker = await requireDocker();
  const backend = new OciBackend({
    docker,
    layout: OCI_LAYOUT,
    images: BUILTIN_TEMPLATES.map((t) => t.image),
    ...extra,
  });
  const host = await backend.checkHost();
  if (host.problems.length)
    throw new Error(`this machine cannot run the oci backend: ${host.problems.join('; ')}; ${START_HINT}`);
  return backend;
}

/** Everything the oci backend has on the host for this container id: runtime state, bundle, cgroups. */
export async function ociLeftovers(id: string): Promise<string[]> {
  const found: string[] = [];
  for (const runtime of ['runc', 'runsc'] as const) {
    try {
      const out = execFileSync(
        `/usr/${runtime === 'runc' ? 'sbin' : 'bin'}/${runtime}`,
        ['--root', join(OCI_LAYOUT.runDir, runtime), 'list', '--format', 'json'],
        { encoding: 'utf8' },
      );
      const list = JSON.parse(out.trim() || '[]') as { id: string }[] | null;
      for (const c of list ?? []) if (c.id === id) found.push(`${runtime} container ${id}`);
    } catch {
      // no state root yet
    }
  }
  if ((await readdir(bundlesDir(OCI_LAYOUT)).catch((): string[] => [])).includes(id))
    found.push(`bundle ${id}`);
  for (const c of CGROUP_CONTROLLERS) {
    const dir = join(OCI_LAYOUT.cgroupRoot, c, CGROUP_PARENT);
    if ((await readdir(dir).catch((): string[] => [])).includes(id)) found.push(`${c} cgroup ${id}`);
  }
  return found;
}
