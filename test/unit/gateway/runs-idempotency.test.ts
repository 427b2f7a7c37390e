/**
 * Idempotent runs (`requestId`): one key of one principal names one run. A repeat while it runs
 * gets that run (its output so far and from then on), a repeat after it ended gets its result, and
 * neither starts anything; another request under the key is a CONFLICT. Where runs are recorded
 * for every process the run's id is derived from the key; where only this process knows them, the
 * key is remembered for as long as the process lives.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildResult } from '../../../src/api/result.js';
import type { RunResult } from '../../../src/api/run.js';
import type { RunExecution, RunRecords, SandboxBackend } from '../../../src/backends/types.js';
import { idempotencyKey, keyedRunId, requestDigest } from '../../../src/gateway/idempotency.js';
import type { Principal } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { RunRequestSchema } from '../../../src/api/run.js';
import type { OutputChunk } from '../../../src/runner/capture.js';
import { AsyncQueue } from '../../../src/shared/async-queue.js';
import { AppError } from '../../../src/shared/errors.js';

const ALICE: Principal = { id: 'token:aaaaaaaaaaaaaaaa', name: 'alice', scope: {} };
const BOB: Principal = { id: 'token:bbbbbbbbbbbbbbbb', name: 'bob', scope: {} };
const RUN = { template: 'python', code: 'print(1)', requestId: 'build-42' };

interface Live {
  runId: string;
  output: AsyncQueue<OutputChunk>;
  finish(stdout: string): void;
}

/** Runs nothing by itself: the test writes each run's output and ends it. */
function fakeBackend(options: { records?: boolean; refuse?: AppError } = {}) {
  const live: Live[] = [];
  const backend: SandboxBackend = {
    name: options.records ? 'kubernetes' : 'docker',
    start(spec, { runId }): RunExecution {
      const output = new AsyncQueue<OutputChunk>();
      let finish!: (stdout: string) => void;
      const result = new Promise<RunResult>((resolve, reject) => {
        if (options.refuse) {
          output.end();
          return reject(options.refuse);
        }
        finish = (stdout) => {
          output.end();
          resolve(
            buildResult({
              runId,
              subject: spec,
              outcome: { phase: 'Succeeded', reason: 'Completed', exitCode: 0 },
              stdout: { text: stdout, bytes: stdout.length, truncated: false, binary: false },
              startedAt: 0,
              finishedAt: 1,
              backend: 'docker',
            }),
          );
        };
      });
      live.push({ runId, output, finish });
      return {
        runId,
        output,
        result,
        cleanedUp: result.then(
          () => undefined,
          () => undefined,
        ),
      };
    },
    ...(options.records ? { runs: noRecords } : {}),
    health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'test' }),
    close: () => Promise.resolve(),
  };
  return { backend, live };
}

const noRecords: RunRecords = {
  get: () => Promise.resolve(undefined),
  cancel: () => Promise.resolve(undefined),
  tasks: () => Promise.resolve([]),
};

function service(backend: SandboxBackend, maxRuns?: number): SandpitService {
  return new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 4, maxQueued: 0 },
    ...(maxRuns ? { history: { maxRuns } } : {}),
  });
}

const chunk = (text: string): OutputChunk => ({ stream: 'stdout', data: Buffer.from(text) });
const isCode = (code: string) => (e: unknown) => e instanceof AppError && e.code === code;

test('the same key twice at once: one run, and the repeat streams it from the start', async () => {
  const { backend, live } = fakeBackend();
  const s = service(backend);
  const seen: string[][] = [[], []];
  const [a, b] = await Promise.all(
    [0, 1].map((i) => s.runs.start(RUN, ALICE, { onOutput: (c) => void seen[i]!.push(c.text) })),
  );
  assert.equal(live.length, 1, 'one run started');
  assert.equal(a!.runId, b!.runId);
  live[0]!.output.push(chunk('hello '));
  await new Promise((r) => setImmediate(r));
  live[0]!.output.push(chunk('world\n'));
  live[0]!.finish('hello world\n');
  const [ra, rb] = await Promise.all([a!.result, b!.result]);
  assert.equal(ra.stdout, 'hello world\n');
  assert.equal(rb.runId, ra.runId);
  assert.equal(rb.stdout, 'hello world\n');
  assert.equal(seen[0]!.join(''), 'hello world\n');
  assert.equal(seen[1]!.join(''), 'hello world\n');
});

test('a repeat that joins a live run gets the output so far, then the rest', async () => {
  const { backend, live } = fakeBackend();
  const s = service(backend);
  const first = await s.runs.start(RUN, ALICE);
  live[0]!.output.push(chunk('early\n'));
  await new Promise((r) => setImmediate(r));
  const seen: string[] = [];
  const repeat = await s.runs.start(RUN, ALICE, { onOutput: (c) => void seen.push(c.text) });
  live[0]!.output.push(chunk('late\n'));
  live[0]!.finish('early\nlate\n');
  await first.result;
  assert.equal((await repeat.result).runId, first.runId);
  assert.deepEqual(seen, ['early\n', 'late\n']);
  assert.equal(live.length, 1);
});

test('after the run ended: its result, nothing started; the field order does not matter', async () => {
  const { backend, live } = fakeBackend();
  const s = service(backend);
  const first = await s.runs.start(RUN, ALICE);
  live[0]!.finish('1\n');
  const done = await first.result;
  const again = await s.runs.run({ requestId: 'build-42', code: 'print(1)', template: 'python' }, ALICE);
  assert.equal(again.runId, done.runId);
  assert.equal(again.stdout, '1\n');
  assert.equal(live.length, 1);
});

test('another request under a used key is a CONFLICT naming requestId; another principal’s same key is its own', async () => {
  const { backend, live } = fakeBackend();
  const s = service(backend);
  const first = await s.runs.start(RUN, ALICE);
  await assert.rejects(s.runs.start({ ...RUN, code: 'print(2)' }, ALICE), (e: unknown) => {
    assert.ok(isCode('CONFLICT')(e));
    assert.match((e as AppError).message, /requestId "build-42" was already used/);
    assert.equal((e as AppError).violations[0]?.field, 'requestId');
    return true;
  });
  const bobs = await s.runs.start(RUN, BOB);
  assert.notEqual(bobs.runId, first.runId);
  assert.equal(live.length, 2);
  for (const l of live) l.finish('');
  await Promise.all([first.result, bobs.result]);
});

test('a key whose run was refused (busy) or failed before it ran is free for the retry', async () => {
  const refused = fakeBackend({ refuse: new AppError('ENGINE_UNAVAILABLE', 'no engine') });
  const s = service(refused.backend);
  await assert.rejects(s.runs.run(RUN, ALICE), isCode('ENGINE_UNAVAILABLE'));
  await assert.rejects(s.runs.run(RUN, ALICE), isCode('ENGINE_UNAVAILABLE'));
  assert.equal(refused.live.length, 2, 'the retry was tried again');
});

test('a malformed key is INVALID_REQUEST, naming the field', async () => {
  const { backend } = fakeBackend();
  const s = service(backend);
  for (const requestId of ['', 'x'.repeat(129), 'a b', 'ä', 'a/b']) {
    await assert.rejects(s.runs.start({ ...RUN, requestId }, ALICE), (e: unknown) => {
      assert.ok(isCode('INVALID_REQUEST')(e), String(e));
      assert.match((e as AppError).message, /requestId/);
      return true;
    });
  }
  assert.equal(RunRequestSchema.safeParse({ ...RUN, requestId: 'A-z.0_9:x' }).success, true);
});

test('where only this process knows runs, a key outlives its result: a repeat is refused, not run again', async () => {
  const { backend, live } = fakeBackend();
  const s = service(backend, 1);
  const first = await s.runs.start(RUN, ALICE);
  live[0]!.finish('');
  await first.result;
  const other = await s.runs.start({ template: 'python', code: 'print(3)' }, ALICE);
  live[1]!.finish('');
  await other.result; // the history keeps one run: the first one's result is gone
  await assert.rejects(s.runs.start(RUN, ALICE), (e: unknown) => {
    assert.ok(isCode('NOT_FOUND')(e));
    assert.match((e as AppError).message, /no longer kept/);
    return true;
  });
  await assert.rejects(s.runs.start({ ...RUN, code: 'print(4)' }, ALICE), isCode('CONFLICT'));
  assert.equal(live.length, 2);
});

test('where runs are recorded for every process, the run id is r- and 16 hex digits of sha256(principal, key)', async () => {
  const { backend, live } = fakeBackend({ records: true });
  const s = service(backend);
  const handle = await s.runs.start(RUN, ALICE);
  assert.equal(handle.runId, keyedRunId(idempotencyKey(ALICE.id, 'build-42')));
  assert.match(handle.runId, /^r-[0-9a-f]{16}$/);
  live[0]!.finish('');
  await handle.result;
  const digest = requestDigest(RunRequestSchema.parse(RUN));
  assert.equal(digest, requestDigest(RunRequestSchema.parse({ ...RUN, requestId: 'other' })));
  assert.notEqual(digest, requestDigest(RunRequestSchema.parse({ ...RUN, code: 'print(2)' })));
});
