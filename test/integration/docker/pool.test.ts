/**
 * Warm pools: a pooled run is as isolated as a cold one (no trace of an earlier run), its deadline
 * counts from the claim, a killed pool container is healed, caps hold under a burst, and shutdown
 * leaves nothing behind.
 */
import assert from 'node:assert/strict';
import { afterEach, before, test } from 'node:test';
import type Docker from 'dockerode';
import { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { REFILL_AFTER_REPLY_MS } from '../../../src/backends/docker/pool/pool-manager.js';
import { DEFAULT_POOL_OPTIONS, type PoolOptions } from '../../../src/backends/docker/pool/pool-options.js';
import { requireDocker, runId, spec } from '../../support/docker.js';
import { engineStretch } from '../../support/timing.js';

let docker: Docker;
let current: DockerBackend | undefined;

before(async () => {
  docker = await requireDocker();
});
// One pooled backend at a time: pool containers are counted per owning process.
afterEach(async () => {
  await current?.close();
  current = undefined;
});

async function pooled(options: Partial<PoolOptions> = {}, template = 'python'): Promise<DockerBackend> {
  const backend = new DockerBackend({ docker, pool: { ...DEFAULT_POOL_OPTIONS, ...options } });
  current = backend;
  backend.pool?.start([spec({ template, code: '' })]);
  assert.ok(await backend.pool?.filled(60_000), 'the pool filled');
  return backend;
}

async function poolContainers(owner: string): Promise<Docker.ContainerInfo[]> {
  return docker.listContainers({
    all: true,
    filters: {
      label: ['sandpit.dev/managed-by=sandpit', 'sandpit.dev/kind=pool', `sandpit.dev/owner=${owner}`],
    },
  });
}

test('a pooled run sees no trace of an earlier run: files, processes, env', async () => {
  const backend = await pooled({ minIdle: 2 }, 'bash');
  const first = await backend.start(
    spec({
      template: 'bash',
      code: 'echo secret > /workspace/left.txt; echo secret > /tmp/left.txt; (sleep 300 &) ; export LEAK=1; echo done',
      env: [{ name: 'FIRST_RUN', value: 'yes' }],
    }),
    { runId: runId() },
  ).result;
  assert.equal(first.served, 'warm');
  assert.equal(first.stdout, 'done\n');
  const second = await backend.start(
    spec({
      template: 'bash',
      code: 'ls -A /workspace /tmp; ps -eo comm= 2>/dev/null || ls /proc | grep -c "^[0-9]"; env | grep -E "FIRST_RUN|LEAK" || echo clean-env',
    }),
    { runId: runId() },
  ).result;
  assert.equal(second.served, 'warm');
  assert.doesNotMatch(second.stdout, /left\.txt/);
  assert.doesNotMatch(second.stdout, /sleep/);
  assert.match(second.stdout, /clean-env/);
});

test('the deadline counts from the claim, not from when the container started', async () => {
  const backend = await pooled({ minIdle: 1 });
  await new Promise((r) => setTimeout(r, 3000)); // the container idles longer than the deadline
  const ok = await backend.start(
    spec({ template: 'python', code: 'import time; time.sleep(1.5); print("made it")', timeoutSeconds: 2 }),
    { runId: runId() },
  ).result;
  assert.equal(ok.served, 'warm');
  assert.equal(ok.phase, 'Succeeded');
  assert.equal(ok.stdout, 'made it\n');
  await backend.pool?.filled(60_000);
  const t0 = performance.now();
  const late = await backend.start(
    spec({ template: 'python', code: 'while True: pass', timeoutSeconds: 2 }),
    { runId: runId() },
  ).result;
  const wall = performance.now() - t0;
  assert.equal(late.served, 'warm');
  assert.equal(late.phase, 'TimedOut');
  const slow = await engineStretch(backend);
  assert.ok(
    wall > 1900 && wall < 2000 + 2000 * slow,
    `ended after ${wall.toFixed(0)} ms (engine ${slow.toFixed(1)}× slower than idle)`,
  );
});

test('a pool container killed by hand is replaced', async () => {
  const backend = await pooled({ minIdle: 2 });
  const [victim] = await poolContainers(backend.owner);
  assert.ok(victim, 'a pool container exists');
  await docker.getContainer(victim.Id).kill();
  // The pool notices the dead container and starts a replacement.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const alive = (await poolContainers(backend.owner)).filter(
      (c) => c.State === 'running' && c.Id !== victim.Id,
    );
    const idle = backend.pool?.stats()[0]?.idle ?? 0;
    if (alive.length >= 2 && idle >= 2) break;
    assert.ok(Date.now() < deadline, 'the pool healed within 30 s');
    await new Promise((r) => setTimeout(r, REFILL_AFTER_REPLY_MS / 3));
  }
  const r = await backend.start(spec({ template: 'python', code: 'print("still warm")' }), { runId: runId() })
    .result;
  assert.equal(r.served, 'warm');
  assert.equal(r.stdout, 'still warm\n');
});

test("a warm run's replacement starts after its result, off its reply's path, and the pool fills again", async () => {
  // No periodic check meanwhile: it would start what the pool lacks, whatever replenish() does.
  const backend = await pooled({ minIdle: 2, checkIntervalSeconds: 3600 });
  const r = await backend.start(spec({ template: 'python', code: 'print(1)' }), { runId: runId() }).result;
  assert.equal(r.served, 'warm');
  // Checked before REFILL_AFTER_REPLY_MS is up: a timer that expires sooner runs first, however late.
  await new Promise((res) => setTimeout(res, REFILL_AFTER_REPLY_MS / 3));
  assert.deepEqual(
    backend.pool?.stats().map(({ idle, starting }) => ({ idle, starting })),
    [{ idle: 1, starting: 0 }],
    'no replacement is starting while the reply goes out',
  );
  assert.ok(await backend.pool?.filled(60_000), 'the pool filled again');
});

test('under a burst of 50 concurrent runs the pool stays within its caps and every run is correct', async () => {
  const caps = { minIdle: 2, maxSize: 4, maxTotal: 6, maxStarting: 2 };
  const backend = await pooled(caps);
  let worst = 0;
  const sampler = setInterval(() => {
    const total = backend.pool?.total ?? 0;
    worst = Math.max(worst, total);
  }, 5);
  const executions = Array.from({ length: 50 }, (_, i) =>
    backend.start(spec({ template: 'python', code: `print(${i} * 2)` }), { runId: runId() }),
  );
  const results = await Promise.all(executions.map((e) => e.result));
  await Promise.all(executions.map((e) => e.cleanedUp));
  clearInterval(sampler);
  results.forEach((r, i) => assert.equal(r.stdout, `${i * 2}\n`, `run ${i}`));
  assert.ok(results.some((r) => r.served === 'warm'));
  assert.ok(worst <= caps.maxSize, `the pool held ${worst} containers, over its cap of ${caps.maxSize}`);
  const left = (await poolContainers(backend.owner)).length;
  assert.ok(left <= caps.maxSize, `${left} pool containers exist after the burst`);
});

test('closing the backend drains the pools and removes every pool container', async () => {
  const backend = await pooled({ minIdle: 3 });
  assert.ok((await poolContainers(backend.owner)).length >= 3);
  await backend.close();
  const left = await poolContainers(backend.owner);
  assert.deepEqual(
    left.map((c) => `${c.Names[0]} ${c.State} ${c.Status}`),
    [],
  );
});

test('a pool no run asked for lately goes: its containers are removed and it is refilled no more', async () => {
  const backend = await pooled({ minIdle: 1, maxIdleSeconds: 2, checkIntervalSeconds: 1 });
  // A one-off shape: its pool is made on demand, then never asked for again.
  const oneOff = spec({ template: 'bash', code: 'true', resources: { memory: '123Mi' } });
  await backend.start(oneOff, { runId: runId() }).result;
  const labelled = async () =>
    (await poolContainers(backend.owner)).filter((c) => c.Labels['sandpit.dev/template'] === 'bash');
  const deadline = Date.now() + 30_000;
  while (!(backend.pool?.stats() ?? []).some((p) => p.template === 'bash')) {
    assert.ok(Date.now() < deadline, 'the one-off pool was made');
    await new Promise((r) => setTimeout(r, REFILL_AFTER_REPLY_MS / 3));
  }
  while ((backend.pool?.stats() ?? []).some((p) => p.template === 'bash') || (await labelled()).length > 0) {
    assert.ok(Date.now() < deadline, 'the unused pool and its containers went within 30 s');
    await new Promise((r) => setTimeout(r, 200));
  }
  // The pre-warmed pool stays however long it goes unused.
  assert.ok((backend.pool?.stats() ?? []).some((p) => p.template === 'python'));
});

test('pool containers carry an expiry label covering their idle life and the longest run', async () => {
  const before = Date.now();
  const backend = await pooled({ minIdle: 1, maxIdleSeconds: 60, maxRunSeconds: 30 });
  const [c] = await poolContainers(backend.owner);
  const expires = Number(c?.Labels['sandpit.dev/expires-at']);
  assert.ok(expires >= before + 90_000, `expires at ${expires}`);
  assert.ok(expires <= Date.now() + 90_000 + 10 * 60_000, `expires at ${expires}`);
});
