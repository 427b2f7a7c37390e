/**
 * The oci backend leaves nothing on the host on any path (its runtime state, bundle and cgroups),
 * never writes into a shared root, and a gateway killed with SIGKILL mid-run (or holding a
 * session) leaves nothing running, and, once a sandpit process reaps, nothing at all.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import { containerId } from '../../../src/backends/oci/layout.js';
import { mountPointsOf } from '../../../src/backends/oci/host-mounts.js';
import type { OciBackend } from '../../../src/backends/oci/oci-backend.js';
import { BUILT_CLI, ensureBuilt } from '../../support/built-cli.js';
import { runId, spec } from '../../support/docker.js';
import { makeOciBackend, OCI_LAYOUT, ociLeftovers } from '../../support/oci.js';

let backend: OciBackend;
before(async () => {
  ensureBuilt();
  backend = await makeOciBackend();
});
after(() => backend.close());

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    assert.ok(Date.now() < deadline, `${what} within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

for (const [name, request, phase] of [
  ['success', { template: 'bash', code: 'true' }, 'Succeeded'],
  ['error exit', { template: 'bash', code: 'exit 9' }, 'Failed'],
  ['timeout', { template: 'bash', code: 'sleep 30', timeoutSeconds: 1 }, 'TimedOut'],
  [
    'out of memory',
    { template: 'python', code: 'x = bytearray(300 << 20)', resources: { memory: '64m' } },
    'Failed',
  ],
] as const) {
  test(`no container, bundle or cgroup is left after ${name}`, async () => {
    const id = runId();
    const execution = backend.start(spec(request), { runId: id });
    const result = await execution.result;
    assert.equal(result.phase, phase, JSON.stringify(result));
    await execution.cleanedUp;
    assert.deepEqual(await ociLeftovers(containerId(id)), []);
  });
}

test('a cancel mid-run ends it Cancelled and leaves nothing behind', async () => {
  const id = runId();
  const controller = new AbortController();
  const execution = backend.start(spec({ template: 'bash', code: 'echo started; sleep 30' }), {
    runId: id,
    signal: controller.signal,
  });
  for await (const chunk of execution.output) {
    if (chunk.data.toString().includes('started')) break;
  }
  assert.notDeepEqual(await ociLeftovers(containerId(id)), [], 'the sandbox exists before the cancel');
  const t0 = performance.now();
  controller.abort();
  const result = await execution.result;
  assert.equal(result.phase, 'Cancelled');
  assert.ok(performance.now() - t0 < 5000, 'the cancel took effect at once');
  await execution.cleanedUp;
  assert.deepEqual(await ociLeftovers(containerId(id)), []);
});

test('the shared root is mounted read-only on the host, and a run cannot change it', async () => {
  const r = await backend.start(spec({ template: 'python', code: 'print(1)' }), { runId: runId() }).result;
  assert.equal(r.phase, 'Succeeded');
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  const roots = mountinfo.split('\n').filter((l) => l.split(' ')[4]?.startsWith(OCI_LAYOUT.rootfsDir));
  assert.ok(roots.length > 0, 'the unpacked python image is a mount point');
  for (const line of roots) assert.match(line.split(' ')[5] ?? '', /^ro,/, line);
  assert.ok(mountPointsOf(mountinfo).some((p) => p.startsWith(OCI_LAYOUT.rootfsDir)));
});

test('a gateway killed with SIGKILL mid-run leaves nothing running, and the next one reaps the rest', async () => {
  const cli = spawn(
    process.execPath,
    [BUILT_CLI, 'run', '-t', 'python', '-c', 'print("up", flush=True)\nimport time\ntime.sleep(25)'],
    { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, SANDPIT_SANDBOX_BACKEND: 'oci' } },
  );
  let out = '';
  cli.stdout.on('data', (b: Buffer) => (out += b.toString()));
  await waitFor('the run printing', () => Promise.resolve(out.includes('up')), 60_000);
  const ids = (await ociLeftoversAll()).filter((l) => l.startsWith('runc container'));
  assert.equal(ids.length, 1, `one container runs: ${ids.join(', ')}`);
  const id = ids[0]!.split(' ').pop()!;
  cli.kill('SIGKILL');
  // The job's deadline is 30 s away: only the end of the runner's stdin can stop it this soon.
  await waitFor('no process of the sandbox left', async () => !(await sandboxRunning(id)), 10_000);
  const reaper = await makeOciBackend();
  try {
    const reaped = await reaper.reap();
    assert.ok(reaped.removed.includes(id), `reaped ${reaped.removed.join(', ')}`);
  } finally {
    await reaper.close();
  }
  assert.deepEqual(await ociLeftovers(id), []);
});

test('a gateway killed with SIGKILL ends its sessions: the runner stops within seconds, the next one reaps the rest', async () => {
  const session = `sigkill-${process.pid}-${Date.now().toString(36)}`;
  const owner = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/support/session-owner.ts', 'unused', session],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, OWNER_BACKEND: 'oci' } },
  );
  let out = '';
  owner.stdout.on('data', (b: Buffer) => (out += b.toString()));
  await waitFor('the session open, with an exec running', () => Promise.resolve(out.includes('\n')), 60_000);
  const id = containerId(`session-${session}`);
  assert.ok(await sandboxRunning(id), 'the session sandbox runs');
  owner.kill('SIGKILL');
  // Its TTL is minutes away: only the end of the runner's stdin can stop it this soon.
  await waitFor('no process of the session left', async () => !(await sandboxRunning(id)), 10_000);
  const reaper = await makeOciBackend();
  try {
    const reaped = await reaper.reap();
    assert.ok(reaped.removed.includes(id), `reaped ${reaped.removed.join(', ')}`);
  } finally {
    await reaper.close();
  }
  assert.deepEqual(await ociLeftovers(id), []);
});

/** Every runc container of sandpit's, as ociLeftovers lists them. */
async function ociLeftoversAll(): Promise<string[]> {
  const { execFileSync } = await import('node:child_process');
  const out = execFileSync(
    '/usr/sbin/runc',
    ['--root', `${OCI_LAYOUT.runDir}/runc`, 'list', '--format', 'json'],
    {
      encoding: 'utf8',
    },
  );
  const list = (JSON.parse(out.trim() || '[]') as { id: string; status: string }[] | null) ?? [];
  return list.filter((c) => c.status === 'running').map((c) => `runc container ${c.id}`);
}

/** Whether any process is left in the sandbox's pids cgroup. */
async function sandboxRunning(id: string): Promise<boolean> {
  const procs = await readFile(`${OCI_LAYOUT.cgroupRoot}/pids/sandpit/${id}/cgroup.procs`, 'utf8').catch(
    () => '',
  );
  return procs.trim() !== '';
}
