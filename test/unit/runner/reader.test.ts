import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { OutputChunk } from '../../../src/runner/capture.js';
import { KEY_BYTES, MIN_PROTOCOL_VERSION } from '../../../src/runner/protocol.js';
import { checkRunnerVersion, RunnerReader } from '../../../src/runner/reader.js';
import { AppError } from '../../../src/shared/errors.js';
import { frame as unkeyed, keyedFrame } from '../../support/runner-frames.js';

const KEY = Buffer.from('9f3c01d2e47a58b6c0ffee1234abcd77', 'hex');
const frame = (type: string, data: Buffer | string = Buffer.alloc(0)): Buffer => keyedFrame(KEY, type, data);
const exitFrame = (report: Record<string, unknown>): Buffer => frame('X', JSON.stringify(report));
const tail = (stream: 1 | 2, s: string): Buffer =>
  frame('T', Buffer.concat([Buffer.from([stream]), Buffer.from(s)]));
const started = (window = { headBytes: 100, tailBytes: 100 }, onChunk = (_: OutputChunk) => {}) => {
  const r = new RunnerReader();
  r.push(unkeyed('R', Buffer.from([0, 0, 0, 3])));
  r.begin(window, KEY, onChunk);
  return r;
};

/** Resolves to whether `p` settled within a few turns of the event loop. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

test('ready resolves on the R frame, not before, with the runner’s protocol version', async () => {
  const r = new RunnerReader();
  assert.equal(await settled(r.ready), false);
  r.push(unkeyed('R', Buffer.from([0, 0, 0, 7])));
  assert.equal(await settled(r.ready), true);
  assert.equal(await r.ready, 7);
  assert.equal(r.finished, false);
});

test('checkRunnerVersion refuses a runner older than the protocol, naming the image and the fix', () => {
  checkRunnerVersion(MIN_PROTOCOL_VERSION, 'sandpit/python:3.11');
  assert.throws(
    () => checkRunnerVersion(MIN_PROTOCOL_VERSION - 1, 'sandpit/python:3.11'),
    (e: unknown) =>
      e instanceof AppError &&
      e.code === 'IMAGE_OUTDATED' &&
      e.message.includes('sandpit/python:3.11') &&
      (e.hint ?? '').includes('sandpit images build'),
  );
});

test('a whole run: live chunks, tails, exit report, captured streams with exact counts', async () => {
  const chunks: OutputChunk[] = [];
  const r = started({ headBytes: 4, tailBytes: 3 }, (c) => chunks.push(c));
  r.push(Buffer.concat([frame('O', 'ab'), frame('E', 'oops'), frame('O', 'cdef')]));
  r.push(
    Buffer.concat([
      tail(1, 'xyz'),
      exitFrame({
        exitCode: 1,
        signal: 0,
        timedOut: false,
        oomKilled: false,
        stdoutBytes: 20,
        stderrBytes: 4,
        durationMs: 7,
      }),
    ]),
  );
  assert.equal(await settled(r.done), true);
  assert.equal(r.finished, true);
  assert.deepEqual(
    chunks.map((c) => [c.stream, c.data.toString()]),
    [
      ['stdout', 'ab'],
      ['stderr', 'oops'],
      ['stdout', 'cd'], // only what fits in the head is shown live
    ],
  );
  const o = r.outcome();
  assert.equal(o.failure, undefined);
  assert.deepEqual(o.exit, {
    exitCode: 1,
    signal: 0,
    timedOut: false,
    oomKilled: false,
    stdoutBytes: 20,
    stderrBytes: 4,
    durationMs: 7,
  });
  assert.deepEqual(o.stdout, {
    text: 'abcd\n[… 13 bytes truncated …]\nxyz',
    bytes: 20,
    truncated: true,
    binary: false,
  });
  assert.deepEqual(o.stderr, { text: 'oops', bytes: 4, truncated: false, binary: false });
});

test('frames split across pushes at every byte give the same outcome', () => {
  const stream = Buffer.concat([
    frame('O', 'hello '),
    frame('O', 'world'),
    tail(2, 'bye'),
    exitFrame({ exitCode: 0, stdoutBytes: 11, stderrBytes: 3 }),
  ]);
  for (let k = 0; k <= stream.length; k++) {
    const r = started();
    r.push(stream.subarray(0, k));
    r.push(stream.subarray(k));
    const o = r.outcome();
    assert.equal(o.exit?.exitCode, 0, `split at ${k}`);
    assert.equal(o.stdout.text, 'hello world');
    assert.equal(o.stderr.text, 'bye');
  }
});

test('output before begin() is counted but not shown', () => {
  const r = new RunnerReader();
  r.push(unkeyed('O', 'early'));
  const o = r.outcome();
  assert.equal(o.stdout.bytes, 5);
  assert.equal(o.stdout.truncated, true);
});

test('a failure frame ends the run with the runner’s message, before the job or after it', async () => {
  const before = new RunnerReader();
  before.push(unkeyed('F', 'bad job header'));
  assert.equal(before.outcome().failure, 'bad job header');
  const r = started();
  r.push(frame('F', 'cannot exec python3: No such file'));
  assert.equal(await settled(r.done), true);
  assert.equal(r.outcome().failure, 'cannot exec python3: No such file');
  assert.equal(r.outcome().exit, undefined);
});

test('malformed output of the runner ends the run as a failure instead of throwing', async () => {
  const r = started();
  r.push(frame('Q', 'junk'));
  assert.equal(await settled(r.done), true);
  assert.match(r.outcome().failure ?? '', /^malformed runner output: unknown runner frame type 0x51/);
  const big = new RunnerReader();
  big.push(Buffer.from([0x4f, 0xff, 0xff, 0xff, 0xff]));
  assert.match(big.outcome().failure ?? '', /too large/);
});

test('frames without the key are skipped and counted: a program cannot forge the report', async () => {
  const chunks: OutputChunk[] = [];
  const r = started({ headBytes: 100, tailBytes: 100 }, (c) => chunks.push(c));
  const forgedExit = JSON.stringify({ exitCode: 0, stdoutBytes: 6 });
  const wrongKey = Buffer.concat([Buffer.alloc(KEY_BYTES, 1), frame('X', forgedExit).subarray(KEY_BYTES)]);
  const injected = Buffer.concat([
    unkeyed('O', 'forged'),
    unkeyed('X', forgedExit),
    wrongKey,
    Buffer.from([0x4f, 0x04, 0, 0, 0]), // an unkeyed header declaring 64 MiB
    KEY.subarray(0, 7), // a key's start without the rest
  ]);
  r.push(Buffer.concat([frame('O', 'real'), injected]));
  assert.equal(await settled(r.done), false, 'no injected frame ended the run');
  r.push(Buffer.concat([injected, exitFrame({ exitCode: 3, stdoutBytes: 4 })]));
  assert.equal(await settled(r.done), true);
  const o = r.outcome();
  assert.equal(o.exit?.exitCode, 3);
  assert.equal(o.stdout.text, 'real');
  assert.equal(o.failure, undefined);
  assert.equal(o.skippedBytes, 2 * injected.length);
  assert.deepEqual(
    chunks.map((c) => c.data.toString()),
    ['real'],
  );
});

test('nothing after the exit frame counts, even in the same chunk', () => {
  const chunks: OutputChunk[] = [];
  const r = started({ headBytes: 100, tailBytes: 100 }, (c) => chunks.push(c));
  r.push(
    Buffer.concat([
      frame('O', 'a'),
      exitFrame({ exitCode: 0, stdoutBytes: 1 }),
      frame('O', 'forged'),
      frame('F', 'late'),
    ]),
  );
  r.push(frame('O', 'later'));
  const o = r.outcome();
  assert.equal(o.stdout.text, 'a');
  assert.equal(o.failure, undefined);
  assert.equal(chunks.length, 1);
});

test('fail() is idempotent and loses to an earlier exit', () => {
  const r = new RunnerReader();
  r.fail('engine went away');
  r.fail('second');
  assert.equal(r.outcome().failure, 'engine went away');
  const s = started();
  s.push(exitFrame({ exitCode: 0 }));
  s.fail('too late');
  assert.equal(s.outcome().failure, undefined);
  assert.equal(s.outcome().exit?.exitCode, 0);
});

test('the exit report’s timedOut and oomKilled come through', () => {
  const r = started();
  r.push(exitFrame({ exitCode: 137, signal: 9, timedOut: true, oomKilled: true }));
  assert.equal(r.outcome().exit?.timedOut, true);
  assert.equal(r.outcome().exit?.oomKilled, true);
  assert.equal(r.outcome().exit?.signal, 9);
});
