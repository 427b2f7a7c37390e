/**
 * A gVisor sandbox's memory cgroup, made by the backend before runsc starts. runsc removes the
 * cgroups it made when its sandbox ends, so when the kernel's OOM killer ended the sandbox (the
 * Sentry is what it kills), the count that says so (memory.oom_control's oom_kill) was gone before
 * anyone could read it, and a memory bomb ended BackendError instead of OOMKilled (found by the
 * hostile tier). runsc joins a cgroup that exists and leaves it (and its limits) as it is, so the
 * limits are written here; the folder goes with the container's removal (removeCgroups). runc
 * keeps its cgroup until `delete` (`run --keep`) and needs none of this.
 */
import { access, mkdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cgroupDir, type OciLayout } from './layout.js';
import type { OciSpec } from './oci-spec.js';

/** Makes the sandbox's memory cgroup with the spec's limits (memory, and memory+swap where the kernel counts swap). */
export async function makeMemoryCgroup(
  layout: OciLayout,
  id: string,
  memory: OciSpec['linux']['resources']['memory'],
): Promise<void> {
  const dir = cgroupDir(layout, 'memory', id);
  await mkdir(dir, { recursive: true });
  try {
    // The memory limit first: memory+swap may never be below it.
    await writeFile(join(dir, 'memory.limit_in_bytes'), String(memory.limit));
    const memsw = join(dir, 'memory.memsw.limit_in_bytes');
    if (
      await access(memsw).then(
        () => true,
        () => false,
      )
    )
      await writeFile(memsw, String(memory.swap));
  } catch (e) {
    await rmdir(dir).catch(() => undefined);
    throw e;
  }
}
