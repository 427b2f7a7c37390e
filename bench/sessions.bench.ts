/**
 * Sessions (issue 14), all in one run on the default runtime: an exec of `python3 -c 'print(1)'`
 * in a session against `docker exec` of the same command into the same container and a host
 * spawn; session create warm (from a session pool) and cold; upload and download of 1 MB and
 * 50 MB against `docker exec -i … sh -c 'cat > f'` and `cat f` into the same hardened container
 * (`docker cp` cannot write into a read-only rootfs container's tmpfs). Targets: exec p50 <= 1.5x
 * host spawn and <= 0.5x docker exec; transfers no slower than their docker exec baseline.
 */
import { spawn } from 'node:child_process';
import type Docker from 'dockerode';
import { DockerBackend } from '../src/backends/docker/docker-backend.js';
import { DEFAULT_POOL_OPTIONS } from '../src/backends/docker/pool/pool-options.js';
import { sessionShape } from '../src/backends/docker/session/docker-sessions.js';
import type { SessionSandbox } from '../src/backends/sessions.js';
import { requireDocker } from '../test/support/docker.js';
import { MiB, runExec, sessionId, sessionPolicy, sessionSpec } from '../test/support/sessions.js';
import { interleaved, report, target } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const CREATE_ROUNDS = Number(process.env.BENCH_CREATE_ROUNDS ?? 8);
const TRANSFER_ROUNDS = Number(process.env.BENCH_TRANSFER_ROUNDS ?? 5);
const policy = sessionPolicy({ ceilings: { workspaceBytes: 256 * MiB, downloadBytes: 64 * MiB } });
const spec = sessionSpec({ template: 'python', resources: { ephemeralStorage: '256Mi' } }, policy);

function hostSpawn(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', ['-c', 'print(1)'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', () => (out === '1\n' ? resolve() : reject(new Error(`host printed ${out}`))));
  });
}

/** `docker exec` of `cmd` into `container`, `input` on its stdin; the bytes it wrote (multiplexed). */
async function dockerExec(container: Docker.Container, cmd: string[], input?: Buffer): Promise<number> {
  const exec = await container.exec({
    Cmd: cmd,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: !!input,
  });
  const stream = await exec.start({ hijack: true, stdin: !!input });
  let bytes = 0;
  stream.on('data', (c: Buffer) => (bytes += c.length));
  const ended = new Promise((r) => stream.on('end', r));
  if (input) stream.end(input);
  await ended;
  const { ExitCode } = await exec.inspect();
  if (ExitCode !== 0) throw new Error(`docker exec ${cmd.join(' ')} exited ${ExitCode}`);
  return bytes;
}

async function sessionExec(sandbox: SessionSandbox): Promise<void> {
  const r = await runExec(sandbox, spec, { command: ['python3', '-c', 'print(1)'] }, { policy });
  if (r.stdout.text !== '1\n') throw new Error(`session exec printed ${r.stdout.text}`);
}

async function execLatency(docker: Docker, sandbox: SessionSandbox): Promise<void> {
  const container = docker.getContainer(`sandpit-session-${sandbox.sessionId}`);
  const series = await interleaved(ROUNDS, {
    'session exec': () => sessionExec(sandbox),
    'docker exec (same container)': () => dockerExec(container, ['python3', '-c', 'print(1)']).then(() => {}),
    'host spawn': hostSpawn,
  });
  const rows = report("exec of python3 -c 'print(1)'", series, 'host spawn');
  const [s, d, h] = rows.map((r) => r.p50) as [number, number, number];
  target('session exec p50 <= 1.5x host spawn', s <= 1.5 * h, `${(s / h).toFixed(2)}x`);
  target('session exec p50 <= 0.5x docker exec', s <= 0.5 * d, `${(s / d).toFixed(2)}x`);
}

async function createLatency(docker: Docker): Promise<void> {
  const cold = new DockerBackend({ docker });
  const warm = new DockerBackend({
    docker,
    pool: { ...DEFAULT_POOL_OPTIONS, minIdle: 1, maxSize: 2 },
  });
  warm.pool!.start([], [sessionShape(spec)]);
  const once = async (backend: DockerBackend, wait: boolean): Promise<number> => {
    if (wait) await backend.pool!.filled();
    const t0 = performance.now();
    const s = await backend.sessions.createSession(spec, {
      sessionId: sessionId('bench'),
      principal: 'bench',
    });
    const ms = performance.now() - t0;
    await s.close('Deleted');
    return ms;
  };
  const samples = { cold: [] as number[], warm: [] as number[] };
  for (let i = -1; i < CREATE_ROUNDS; i++) {
    const c = await once(cold, false);
    const w = await once(warm, true);
    if (i < 0) continue; // warm-up
    samples.cold.push(c);
    samples.warm.push(w);
  }
  report(
    'session create (until its runner answered the open)',
    [
      { name: 'warm (session pool)', samples: samples.warm },
      { name: 'cold', samples: samples.cold },
    ],
    'cold',
  );
  await Promise.all([cold.close(), warm.close()]);
}

async function transfers(docker: Docker, sandbox: SessionSandbox): Promise<void> {
  const container = docker.getContainer(`sandpit-session-${sandbox.sessionId}`);
  for (const size of [1_000_000, 50_000_000]) {
    const data = Buffer.alloc(size, 0x61);
    const label = `${size / 1_000_000} MB`;
    const series = await interleaved(
      TRANSFER_ROUNDS,
      {
        [`session upload ${label}`]: async () => {
          await sandbox.writeFile({ path: 'up.bin', data });
        },
        [`docker exec -i cat > f ${label}`]: async () => {
          await dockerExec(container, ['sh', '-c', 'cat > /workspace/base.bin'], data);
        },
        // Both downloads drain their stream and count its bytes, as a consumer that streams them on does.
        [`session download ${label}`]: async () => {
          const r = await sandbox.readFile({ path: 'up.bin', maxBytes: 64 * MiB });
          let bytes = 0;
          for await (const chunk of r.data) bytes += chunk.length;
          if (bytes !== size) throw new Error('short download');
        },
        [`docker exec cat f ${label}`]: async () => {
          if ((await dockerExec(container, ['cat', '/workspace/base.bin'])) < size)
            throw new Error('short cat');
        },
      },
      1,
    );
    const rows = report(`transfer ${label}`, series, `docker exec -i cat > f ${label}`);
    const [up, upBase, down, downBase] = rows.map((r) => r.p50) as [number, number, number, number];
    target(`upload ${label} no slower than docker exec -i`, up <= upBase, `${(up / upBase).toFixed(2)}x`);
    target(
      `download ${label} no slower than docker exec cat`,
      down <= downBase,
      `${(down / downBase).toFixed(2)}x`,
    );
  }
}

export default async function main(): Promise<void> {
  const docker = await requireDocker();
  const backend = new DockerBackend({ docker });
  const sandbox = await backend.sessions.createSession(spec, {
    sessionId: sessionId('bench'),
    principal: 'bench',
  });
  try {
    await execLatency(docker, sandbox);
    await transfers(docker, sandbox);
  } finally {
    await sandbox.close('Deleted');
    await backend.close();
  }
  await createLatency(docker);
}
