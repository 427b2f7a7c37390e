/**
 * The raw Engine API baseline the benchmarks compare against: a container with sandpit's
 * hardening, made and removed directly through dockerode, with no sandpit code in the path.
 */
import type Docker from 'dockerode';

const BENCH_LABELS = { 'sandpit.dev/managed-by': 'sandpit', 'sandpit.dev/kind': 'bench' };

/** A hardened python container running `cmd` (or `entrypoint`), labelled as the project's. */
export function rawContainer(
  docker: Docker,
  runtime: string,
  command: { Cmd?: string[]; Entrypoint?: string[] },
): Promise<Docker.Container> {
  return docker.createContainer({
    Image: 'sandpit/python:3.11',
    ...command,
    User: '1000:1000',
    Labels: BENCH_LABELS,
    HostConfig: {
      NetworkMode: 'none',
      Memory: 512 * 1024 ** 2,
      MemorySwap: 512 * 1024 ** 2,
      NanoCpus: 1e9,
      PidsLimit: 128,
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': 'rw,size=64m', '/workspace': 'rw,size=64m,uid=1000,gid=1000' },
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Runtime: runtime,
    },
  });
}

/** One python `code` run the raw way: create, start, wait, logs, remove. */
export async function rawRun(docker: Docker, runtime: string, code: string): Promise<void> {
  const container = await rawContainer(docker, runtime, { Cmd: ['python3', '-c', code] });
  await container.start();
  await container.wait();
  const logs = await container.logs({ stdout: true, stderr: true });
  await container.remove({ force: true });
  if (!logs.includes('1')) throw new Error('raw run printed nothing');
}

/**
 * The engine's own ceiling: `loops` concurrent raw runs back to back for `seconds`. Every sandpit
 * run needs one fresh container, so no pool can sustain more runs per second than this.
 */
export async function rawRunsPerSecond(
  docker: Docker,
  runtime: string,
  code: string,
  loops: number,
  seconds: number,
): Promise<number> {
  const end = performance.now() + seconds * 1000;
  let done = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (performance.now() < end) {
        await rawRun(docker, runtime, code);
        done++;
      }
    }),
  );
  return done / ((performance.now() - t0) / 1000);
}
