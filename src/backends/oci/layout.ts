/**
 * Where the OCI backend keeps things on the host, every name carrying the project's: per-run
 * bundles and the runtimes' state under the run directory (sandpit's own `--root`, never the
 * runtimes' default one), unpacked images under the cache directory, and each run's cgroup under
 * the `sandpit` parent of every controller. Clean-up looks only there, at names only sandpit makes.
 */
import { join } from 'node:path';
import { AppError } from '../../shared/errors.js';

export interface OciLayout {
  /** Bundles, the runtimes' state and the shared /etc files (e.g. /run/sandpit/oci). */
  runDir: string;
  /** Unpacked images (e.g. ~/.cache/sandpit/oci/rootfs). */
  rootfsDir: string;
  /** The cgroup v1 hierarchy (/sys/fs/cgroup). */
  cgroupRoot: string;
}

export type OciRuntime = 'runc' | 'runsc';

/** Container ids are `sandpit-<run or session id>`: runc's id alphabet, and a name only sandpit uses. */
export const CONTAINER_PREFIX = 'sandpit-';
/** Every run's cgroup is `/sandpit/<container id>` in each controller. */
export const CGROUP_PARENT = 'sandpit';
/**
 * The cgroup v1 hierarchies a runtime makes a run's cgroup in, and `unified`: the cgroup v2 mount
 * of a hybrid host (systemd's), where runc makes one too.
 */
export const CGROUP_CONTROLLERS = [
  'memory',
  'pids',
  'cpu',
  'cpuacct',
  'cpuset',
  'devices',
  'freezer',
  'blkio',
  'systemd',
  'unified',
] as const;

const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$/;

export function containerId(name: string): string {
  const id = `${CONTAINER_PREFIX}${name}`;
  if (!ID.test(id)) throw new AppError('INTERNAL', `"${name}" cannot name a container`);
  return id;
}

export function isOurs(id: string): boolean {
  return id.startsWith(CONTAINER_PREFIX) && ID.test(id);
}

export function bundleDir(layout: OciLayout, id: string): string {
  return join(layout.runDir, 'bundles', id);
}

export function bundlesDir(layout: OciLayout): string {
  return join(layout.runDir, 'bundles');
}

/** The runtime's own state (`--root`): sandpit's containers only. */
export function stateRoot(layout: OciLayout, runtime: OciRuntime): string {
  return join(layout.runDir, runtime);
}

/** The read-only files every sandbox gets at /etc/resolv.conf, /etc/hosts and /etc/hostname. */
export function etcFiles(layout: OciLayout): { resolvConf: string; hosts: string; hostname: string } {
  const dir = join(layout.runDir, 'etc');
  return { resolvConf: join(dir, 'resolv.conf'), hosts: join(dir, 'hosts'), hostname: join(dir, 'hostname') };
}

export function cgroupsPath(id: string): string {
  return `/${CGROUP_PARENT}/${id}`;
}

/** The run's cgroup folder in one controller. */
export function cgroupDir(layout: OciLayout, controller: string, id: string): string {
  return join(layout.cgroupRoot, controller, CGROUP_PARENT, id);
}
