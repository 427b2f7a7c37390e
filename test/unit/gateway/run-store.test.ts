import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunResult } from '../../../src/api/run.js';
import { LiveOutput } from '../../../src/gateway/live-output.js';
import { RunStore, type RunRecord } from '../../../src/gateway/run-store.js';

const limits = {
  cpuMilli: 1000,
  memoryBytes: 1,
  pids: 1,
  workspaceBytes: 1,
  tmpBytes: 1,
  timeoutSeconds: 1,
  outputBytes: 1,
  fileSizeBytes: 1,
  openFiles: 1,
};

function record(runId: string): RunRecord {
  return {
    runId,
    owner: 'p',
    createdAt: 0,
    subject: { template: 'python', image: 'sandpit/python:3.11', runtime: undefined, limits },
    controller: new AbortController(),
    result: undefined,
    settled: Promise.resolve(),
    live: new LiveOutput(),
    followers: new Set(),
  };
}

function result(runId: string, stdout = '', stderr = ''): RunResult {
  return {
    runId,
    phase: 'Succeeded',
    exitCode: 0,
    timedOut: false,
    stdout,
    stderr,
    truncated: false,
    stdoutBytes: Buffer.byteLength(stdout),
    stderrBytes: Buffer.byteLength(stderr),
    binaryOutput: false,
    durationMs: 1,
  };
}

test('add and get', () => {
  const s = new RunStore();
  const r = record('a');
  s.add(r);
  assert.equal(s.get('a'), r);
  assert.equal(s.get('b'), undefined);
});

test('active lists the runs without a result', () => {
  const s = new RunStore();
  const [a, b, c] = ['a', 'b', 'c'].map(record) as [RunRecord, RunRecord, RunRecord];
  s.add(a);
  s.add(b);
  s.add(c);
  s.finish(b, result('b'));
  assert.deepEqual(
    s.active().map((r) => r.runId),
    ['a', 'c'],
  );
});

test('finish stores the result, drops the live output, and the run stays readable', () => {
  const s = new RunStore();
  const r = record('a');
  s.add(r);
  r.live?.add({ stream: 'stdout', data: Buffer.from('x') });
  const res = result('a');
  s.finish(r, res);
  assert.equal(s.get('a')?.result, res);
  assert.equal(s.get('a')?.live, undefined);
});

test('finished history is bounded: the oldest finished runs go, live runs never do', () => {
  const s = new RunStore({ maxRuns: 2 });
  const live = record('live');
  s.add(live);
  const done = ['d1', 'd2', 'd3', 'd4'].map(record);
  for (const r of done) {
    s.add(r);
    s.finish(r, result(r.runId));
  }
  assert.equal(s.get('d1'), undefined);
  assert.equal(s.get('d2'), undefined);
  assert.ok(s.get('d3'));
  assert.ok(s.get('d4'));
  assert.equal(s.get('live'), live);
  assert.deepEqual(
    s.active().map((r) => r.runId),
    ['live'],
  );
});

test('a bound of 0 keeps no finished runs', () => {
  const s = new RunStore({ maxRuns: 0 });
  const r = record('a');
  s.add(r);
  s.finish(r, result('a'));
  assert.equal(s.get('a'), undefined);
});

test('the default bound keeps 1000 finished runs', () => {
  const s = new RunStore();
  for (let i = 0; i < 1001; i++) {
    const r = record(`r${i}`);
    s.add(r);
    s.finish(r, result(r.runId));
  }
  assert.equal(s.get('r0'), undefined);
  assert.ok(s.get('r1'));
  assert.ok(s.get('r1000'));
});

const MiB = 1024 ** 2;

test('the history is bounded by bytes: no sequence of large results grows it past its budget', () => {
  const s = new RunStore({ maxBytes: 8 * MiB });
  const big = 'x'.repeat(MiB);
  for (let i = 0; i < 200; i++) {
    const r = record(`r${i}`);
    s.add(r);
    s.finish(r, result(r.runId, big, big)); // 1 MiB per stream, never delivered
    assert.ok(s.historyBytes <= 8 * MiB, `${s.historyBytes} bytes after ${i + 1} runs`);
  }
  assert.equal(s.get('r199')?.result?.stdout, 'x'.repeat(MiB), 'the newest stays whole');
  assert.match(
    s.get('r198')?.result?.stdout ?? '',
    /^\[… the first \d+ bytes are not kept/,
    'older ones are cut',
  );
  assert.match(
    s.get('r0')?.result?.stdout ?? '',
    /^\[… the first \d+ bytes are not kept/,
    'and stay readable',
  );
});

test('once delivered, only a short tail of each stream stays, with the counts of what there was', () => {
  const s = new RunStore({ deliveredTailBytes: 8 });
  const r = record('a');
  s.add(r);
  const full = result('a', 'head…0123456789', 'short');
  s.finish(r, full);
  assert.equal(s.get('a')?.result, full, 'whole until delivered');
  s.delivered('a');
  const kept = s.get('a')?.result;
  assert.equal(kept?.stdout, '[… the first 9 bytes are not kept after the result was delivered …]\n23456789');
  assert.equal(kept?.stderr, 'short');
  assert.equal(kept?.truncated, true);
  assert.equal(kept?.stdoutBytes, full.stdoutBytes);
  assert.ok(s.historyBytes < 2048, `${s.historyBytes}`);
  s.delivered('missing'); // a run the store no longer has: nothing happens
});

test('a delivered result costs only its tails: two hundred delivered 2 MiB results fit in 4 MiB', () => {
  const s = new RunStore({ maxBytes: 4 * MiB });
  const big = 'y'.repeat(MiB);
  for (let i = 0; i < 200; i++) {
    const r = record(`r${i}`);
    s.add(r);
    s.finish(r, result(r.runId, big, big));
    s.delivered(r.runId);
  }
  assert.ok(s.get('r0'), 'the first is still readable');
  assert.ok(s.historyBytes <= 4 * MiB);
});
