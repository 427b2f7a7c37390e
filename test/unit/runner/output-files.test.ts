/** Output files in-band (protocol 5): the frames, put back together, checked against the job's caps. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OUTPUTS_PROTOCOL_VERSION } from '../../../src/runner/protocol.js';
import { checkRunnerVersion, RunnerReader } from '../../../src/runner/reader.js';
import { frame as unkeyed, keyedFrame } from '../../support/runner-frames.js';

const KEY = Buffer.from('9f3c01d2e47a58b6c0ffee1234abcd77', 'hex');
const frame = (type: string, data: Buffer | string = Buffer.alloc(0)): Buffer => keyedFrame(KEY, type, data);
const EXIT = frame(
  'X',
  JSON.stringify({
    exitCode: 0,
    signal: 0,
    timedOut: false,
    oomKilled: false,
    stdoutBytes: 0,
    stderrBytes: 0,
  }),
);
const header = (path: string | Buffer, size: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(size);
  return frame('P', Buffer.concat([b, Buffer.from(path)]));
};
const skipFrame = (reason: number, entry: string, message: string): Buffer => {
  const e = Buffer.from(entry);
  const head = Buffer.from([reason, e.length >> 8, e.length & 0xff]);
  return frame('S', Buffer.concat([head, e, Buffer.from(message)]));
};

function reader(caps = { maxFiles: 32, maxBytes: 1000 }): RunnerReader {
  const r = new RunnerReader();
  r.push(unkeyed('R', Buffer.from([0, 0, 0, 5])));
  r.begin({ headBytes: 10, tailBytes: 10 }, KEY, () => {}, caps);
  return r;
}

describe('output files from the runner', () => {
  test('files in one or many data frames, an empty file, and skips with their reasons', async () => {
    const r = reader();
    r.push(Buffer.concat([header('a.txt', 5), frame('D', 'he'), frame('D', 'llo'), header('empty', 0)]));
    r.push(Buffer.concat([header('d/b.bin', 2), frame('D', Buffer.from([0, 255]))]));
    r.push(
      Buffer.concat([skipFrame(2, 'x.png', 'no such file'), skipFrame(4, 'f33.txt', 'over the cap'), EXIT]),
    );
    await r.done;
    const { outputs, failure } = r.outcome();
    assert.equal(failure, undefined);
    assert.deepEqual(outputs, {
      files: [
        { path: 'a.txt', data: Buffer.from('hello') },
        { path: 'empty', data: Buffer.alloc(0) },
        { path: 'd/b.bin', data: Buffer.from([0, 255]) },
      ],
      skipped: [
        { entry: 'x.png', reason: 'NoMatch', message: 'no such file' },
        { entry: 'f33.txt', reason: 'TooManyFiles', message: 'over the cap' },
      ],
    });
  });

  test('a data frame may carry up to 65535 bytes (written once nothing else can write); others not', async () => {
    const r = reader({ maxFiles: 32, maxBytes: 200_000 });
    const big = Buffer.alloc(0xffff, 7);
    r.push(Buffer.concat([header('big.bin', 0xffff + 1), frame('D', big), frame('D', 'x'), EXIT]));
    await r.done;
    assert.equal(r.outcome().outputs?.files[0]?.data.length, 0x10000);
    const text = reader();
    text.push(frame('O', Buffer.alloc(5000)));
    await text.done;
    assert.match(text.outcome().failure ?? '', /too large/);
  });

  test('a path the gateway cannot carry safely is named, not kept; its data is still consumed', async () => {
    const r = reader();
    for (const bad of ['../x', '/etc/passwd', 'a\nb', Buffer.from([0x61, 0xff])]) {
      r.push(Buffer.concat([header(bad, 1), frame('D', 'z')]));
    }
    r.push(Buffer.concat([header('ok', 1), frame('D', 'k'), EXIT]));
    await r.done;
    const outputs = r.outcome().outputs!;
    assert.deepEqual(outputs.files, [{ path: 'ok', data: Buffer.from('k') }]);
    assert.deepEqual(
      outputs.skipped.map((s) => [s.entry, s.reason]),
      [
        ['../x', 'NameNotAllowed'],
        ['/etc/passwd', 'NameNotAllowed'],
        ['a\uFFFDb', 'NameNotAllowed'],
        ['a\uFFFD', 'NameNotAllowed'],
      ],
    );
  });

  for (const [name, bytes] of [
    ['more files than the job allows', Buffer.concat([header('a', 0), header('b', 0)])],
    ['more bytes than the job allows', header('big', 11)],
    ['data beyond what the header said', Buffer.concat([header('a', 1), frame('D', 'xy')])],
    ['a header before the last file is complete', Buffer.concat([header('a', 2), header('b', 0)])],
    ['data outside a file', frame('D', 'x')],
    ['an unknown skip reason', skipFrame(99, 'x', 'y')],
  ] as const) {
    test(`a runner that sends ${name} has broken the protocol: the run fails`, async () => {
      const r = reader({ maxFiles: 1, maxBytes: 10 });
      r.push(bytes);
      await r.done;
      assert.match(r.outcome().failure ?? '', /^malformed runner output/);
    });
  }

  test('files from a job that asked for none are a broken protocol; a file cut off by the end is named', async () => {
    const none = new RunnerReader();
    none.push(unkeyed('R', Buffer.from([0, 0, 0, 5])));
    none.begin({ headBytes: 10, tailBytes: 10 }, KEY, () => {});
    none.push(header('a', 0));
    await none.done;
    assert.match(none.outcome().failure ?? '', /did not ask for/);

    const cut = reader();
    cut.push(Buffer.concat([header('half', 4), frame('D', 'ab')]));
    cut.fail('the sandbox ended');
    assert.deepEqual(cut.outcome().outputs?.skipped, [
      { entry: 'half', reason: 'Unreadable', message: 'the sandbox ended after 2 of its 4 bytes' },
    ]);
  });

  test('a runner older than protocol 5 is refused for a job with outputs, naming the fix', () => {
    const need = { version: OUTPUTS_PROTOCOL_VERSION, what: 'returning output files' };
    checkRunnerVersion(OUTPUTS_PROTOCOL_VERSION, 'sandpit/python:3.11', need);
    assert.throws(() => checkRunnerVersion(4, 'sandpit/python:3.11', need), {
      code: 'IMAGE_OUTDATED',
      message: /sandpit\/python:3.11 speaks protocol 4; returning output files needs 5/,
    });
  });
});
