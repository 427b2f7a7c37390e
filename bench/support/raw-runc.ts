/**
 * The raw OCI runtime baseline the oci benchmark compares against: the same bundle the oci backend
 * would make for python (its builder, its read-only root), with python3 -c as the process instead of
 * the runner, run with `runc run` directly: no sandpit code in the path. Also a container created
 * ahead (`runc create`) and only started when timed, to weigh a pre-created pool.
 */
import { spawn } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { arch, release } from 'node:os';
import { join } from 'node:path';
import type { OciLayout } from '../../src/backends/oci/layout.js';
import { cgroupsPath, etcFiles } from '../../src/backends/oci/layout.js';
import { buildRuntimeSpec } from '../../src/backends/oci/runtime-spec.js';
import { goArch } from '../../src/backends/oci/seccomp.js';
import { spec } from '../../test/support/docker.js';

export interface RawRunc {
  /** `runc run` of a fresh container, to its exit. */
  run(): Promise<void>;
  /** Creates a container ahead (untimed); `start` starts it and waits for its exit, `remove` deletes it. */
  created(): Promise<{ start: () => Promise<void>; remove: () => Promise<void> }>;
  /** 8 loops (or `loops`) of run() for `seconds`: containers per second. */
  perSecond(loops: number, seconds: number): Promise<number>;
  close(): Promise<void>;
}

function exec(file: string, args: string[]): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', resolve);
  });
}

export function rawRunc(layout: OciLayout, rootfs: string, env: string[]): RawRunc {
  const root = join(layout.runDir, 'bench-runc');
  const bundles = join(layout.runDir, 'bench-bundles');
  let n = 0;
  const bundleFor = async (id: string): Promise<string> => {
    const s = spec({ template: 'python', code: '' });
    const oci = buildRuntimeSpec(s, {
      rootfs,
      imageEnv: env,
      etc: etcFiles(layout),
      cgroupsPath: cgroupsPath(id),
      annotations: {},
      host: { arch: goArch(arch()), kernel: release() },
    });
    oci.process.args = ['/usr/bin/python3', '-c', 'print(1)'];
    const dir = join(bundles, id);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'config.json'), JSON.stringify(oci));
    return dir;
  };
  const done = async (id: string): Promise<void> => {
    await exec('/usr/sbin/runc', ['--root', root, 'delete', '--force', id]);
    await rm(join(bundles, id), { recursive: true, force: true });
  };
  const run = async (): Promise<void> => {
    const id = `sandpit-bench-${process.pid}-${n++}`;
    const bundle = await bundleFor(id);
    const code = await exec('/usr/sbin/runc', ['--root', root, 'run', '--bundle', bundle, id]);
    await rm(bundle, { recursive: true, force: true });
    if (code !== 0) throw new Error(`runc run exited ${code}`);
  };
  return {
    run,
    async created() {
      const id = `sandpit-bench-${process.pid}-${n++}`;
      const bundle = await bundleFor(id);
      const create = spawn('/usr/sbin/runc', ['--root', root, 'create', '--bundle', bundle, id], {
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      const exited = new Promise<void>((r) => create.stdout.on('end', () => r()));
      await new Promise((r) => create.on('exit', r));
      return {
        start: async () => {
          const code = await exec('/usr/sbin/runc', ['--root', root, 'start', id]);
          if (code !== 0) throw new Error(`runc start exited ${code}`);
          await exited;
        },
        remove: () => done(id),
      };
    },
    async perSecond(loops, seconds) {
      const end = performance.now() + seconds * 1000;
      let count = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: loops }, async () => {
          while (performance.now() < end) {
            await run();
            count++;
          }
        }),
      );
      return count / ((performance.now() - t0) / 1000);
    },
    async close() {
      await rm(bundles, { recursive: true, force: true });
    },
  };
}
