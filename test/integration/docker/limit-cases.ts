/**
 * Resource limits hold against hostile programs: memory, processes, disk, CPU. One suite, run
 * against the Docker backend (limits.test.ts) and the oci backend (test/integration/oci).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { runId, runToEnd, spec } from '../../support/docker.js';
import { hostCommandMs, hostStretch } from '../../support/timing.js';

export function limitCases(make: () => Promise<SandboxBackend>): void {
  let backend: SandboxBackend;
  before(async () => {
    backend = await make();
  });
  after(() => backend.close());

  test('a memory hog is reported OOMKilled', async () => {
    const r = await runToEnd(backend, {
      template: 'python',
      code: 'chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))',
      resources: { memory: '128m' },
    });
    assert.equal(r.phase, 'Failed');
    assert.equal(r.reason, 'OOMKilled');
    assert.equal(r.exitCode, 137);
    assert.equal(r.limits?.memoryBytes, 128 * 1024 ** 2);
  });

  test('a fork bomb is contained: at most the pids limit of processes, and the host stays responsive', async () => {
    const pids = 64;
    const slow = await hostStretch();
    // Fork sleepers until fork fails and count them; then let a classic shell bomb loose.
    const code = [
      'import os, subprocess, time',
      'children = []',
      'while len(children) < 1000:',
      '    try: pid = os.fork()',
      '    except OSError: break',
      '    if pid == 0:',
      '        time.sleep(30); os._exit(0)',
      '    children.append(pid)',
      'print("spawned", len(children))',
      'print("visible", len([p for p in os.listdir("/proc") if p.isdigit()]))',
      'for pid in children: os.kill(pid, 9); os.waitpid(pid, 0)',
      'subprocess.Popen(["bash", "-c", "bomb() { bomb | bomb & }; bomb"], stderr=subprocess.DEVNULL)',
      'time.sleep(3)',
      'print("survived")',
    ].join('\n');
    // The happy path takes about 4 s; the deadline is headroom for a loaded machine, where the bomb's
    // processes share the sandbox's CPU with the program that must print "survived" (at 8 s a run
    // in a full CI run ended before it could).
    const execution = backend.start(
      spec({ template: 'python', code, resources: { pids }, timeoutSeconds: 20 }),
      { runId: runId() },
    );
    await new Promise((r) => setTimeout(r, 2500));
    const hostMs = await hostCommandMs();
    const r = await execution.result;
    await execution.cleanedUp;
    const spawned = Number(/spawned (\d+)/.exec(r.stdout)?.[1]);
    const visible = Number(/visible (\d+)/.exec(r.stdout)?.[1]);
    assert.ok(spawned > 10 && spawned < pids, `spawned ${spawned} processes under a limit of ${pids}`);
    assert.ok(visible <= pids, `${visible} processes visible at once`);
    assert.ok(
      hostMs < 1000 * slow,
      `a host command took ${hostMs.toFixed(0)} ms during the bomb (host ${slow.toFixed(1)}× slower than idle before it)`,
    );
    assert.match(r.stdout, /survived/, r.stderr);
  });

  const FILL = [
    'import errno, sys',
    'written = 0',
    'try:',
    '    with open(sys.argv[1] + "/fill", "wb") as f:',
    '        while written < 200 * 1024 * 1024:',
    '            f.write(b"\\0" * 1024 * 1024); f.flush(); written += 1024 * 1024',
    'except OSError as e:',
    '    print(errno.errorcode[e.errno])',
    'import os; print(os.path.getsize(sys.argv[1] + "/fill"))',
  ].join('\n');

  // Each directory gets the smaller size, so its tmpfs (not the fsize ulimit, which follows the larger) stops the writer.
  for (const [dir, sizes] of [
    ['/tmp', { tmpBytes: 16 * 1024 ** 2, workspace: '64m' }],
    ['/workspace', { tmpBytes: 64 * 1024 ** 2, workspace: '16m' }],
  ] as const) {
    test(`filling ${dir} stops at its size`, async () => {
      const r = await runToEnd(
        backend,
        {
          template: 'python',
          command: ['python3', '/sandpit/code/main.py', dir],
          code: FILL,
          resources: { ephemeralStorage: sizes.workspace },
        },
        { ceilings: { tmpBytes: sizes.tmpBytes } },
      );
      const [error, size] = r.stdout.trim().split('\n');
      assert.equal(error, 'ENOSPC', r.stdout + r.stderr);
      assert.ok(
        Number(size) <= 16 * 1024 ** 2 && Number(size) > 12 * 1024 ** 2,
        `wrote ${size} bytes into a 16 MiB ${dir}`,
      );
    });
  }

  test('CPU is limited to the requested share', async () => {
    // Two busy threads for ~1 s of wall time under a 0.5 CPU limit use about 0.5 s of CPU.
    const code = [
      'import os, threading, time',
      'def spin():',
      '    end = time.time() + 1.5',
      '    while time.time() < end: pass',
      'ts = [threading.Thread(target=spin) for _ in range(2)]',
      't0 = time.time()',
      '[t.start() for t in ts]; [t.join() for t in ts]',
      'wall = time.time() - t0',
      'cpu = sum(os.times()[:2])',
      'print(round(cpu / wall, 2))',
    ].join('\n');
    const r = await runToEnd(backend, { template: 'python', code, resources: { cpu: '500m' } });
    const share = Number(r.stdout.trim());
    // The bound that matters is the upper one. The lower one only shows that the threads ran: a
    // loaded machine (the other CI lane) can leave them far less than their limit.
    assert.ok(share > 0.05 && share < 0.75, `used ${share} CPUs under a 0.5 limit`);
  });
}
