import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  encodeTrailer,
  MAX_TRAILER_BYTES,
  parseTrailer,
  TrailerFilter,
  type TrailerEnd,
} from '../../../src/runner/exit-trailer.js';
import { ExitReportSchema, newChannelKey } from '../../../src/runner/protocol.js';

const key = newChannelKey();
const exit: TrailerEnd = {
  kind: 'exit',
  report: ExitReportSchema.parse({ exitCode: 3, stdoutBytes: 5, durationMs: 12 }),
};

/** Feeds `chunks` through a filter; what it passed on, and how the stream ended. */
function filter(chunks: (string | Buffer)[], withKey?: Buffer) {
  const f = new TrailerFilter(withKey);
  const out = chunks.map((c) => f.push(Buffer.isBuffer(c) ? c : Buffer.from(c)));
  const { rest, end } = f.end();
  return { output: Buffer.concat([...out, rest]).toString(), end };
}

/** `stream` in chunks of `size` bytes. */
function chunked(stream: Buffer, size: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let i = 0; i < stream.length; i += size) chunks.push(stream.subarray(i, i + size));
  return chunks;
}

const KUBELET_ERROR =
  'rpc error: code = NotFound desc = an error occurred when try to find container "9c92": not found';

describe('the exit trailer', () => {
  test('round-trips an exit report and a failure, with and without the key', () => {
    assert.deepEqual(parseTrailer(encodeTrailer(key, exit), key), exit);
    assert.deepEqual(parseTrailer(encodeTrailer(key, exit)), exit);
    const failure: TrailerEnd = { kind: 'failure', message: 'no job arrived within 10 s of an attach' };
    assert.deepEqual(parseTrailer(encodeTrailer(key, failure), key), failure);
  });

  test('a trailer with another key, a bad report or a second line is not the runner’s', () => {
    assert.equal(parseTrailer(encodeTrailer(newChannelKey(), exit), key), undefined);
    const text = encodeTrailer(key, exit).toString();
    assert.equal(parseTrailer(Buffer.from(text.replace('"exitCode":3', '"exitCode":"x"'))), undefined);
    assert.equal(parseTrailer(Buffer.from(text.replace(' {', ' \n{'))), undefined);
    assert.equal(parseTrailer(Buffer.from(text.slice(1))), undefined);
  });

  test('the filter gives back exactly the output, whatever the chunking', () => {
    const stream = Buffer.concat([Buffer.from('line 1\nline 2 without newline'), encodeTrailer(key, exit)]);
    for (let size = 1; size <= stream.length; size += 7) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < stream.length; i += size) chunks.push(stream.subarray(i, i + size));
      const r = filter(chunks, key);
      assert.equal(r.output, 'line 1\nline 2 without newline', `chunks of ${size}`);
      assert.deepEqual(r.end, exit);
    }
  });

  test('holds back only what could be the trailer', () => {
    const f = new TrailerFilter(key);
    assert.equal(f.push(Buffer.from('a\nb\nc\n')).toString(), 'a\nb\nc');
    assert.equal(f.heldBytes, 1);
    assert.equal(f.push(Buffer.from('d\n\x1esandpit-ex')).toString(), '\nd');
    assert.equal(f.push(Buffer.from('it 00 {}')).length, 0);
    assert.equal(f.push(Buffer.from('x'.repeat(MAX_TRAILER_BYTES))).length > 0, true);
    assert.equal(f.heldBytes, 0);
  });

  test('output without a trailer passes whole; a forged trailer before the real one stays output', () => {
    assert.deepEqual(filter(['no trailer\n']), { output: 'no trailer\n', end: undefined });
    const forged = encodeTrailer(newChannelKey(), { ...exit, report: { ...exit.report, exitCode: 0 } });
    const r = filter(
      [Buffer.concat([Buffer.from('x'), forged, Buffer.from('y'), encodeTrailer(key, exit)])],
      key,
    );
    assert.equal(r.output, `x${forged.toString()}y`);
    assert.deepEqual(r.end, exit);
    // Without the key the last well-formed trailer is removed, and only that one.
    const keyless = filter([Buffer.concat([forged, encodeTrailer(key, exit)])]);
    assert.equal(keyless.output, forged.toString());
  });

  test('a trailer under the wrong key at the very end is output, not an end', () => {
    const r = filter([Buffer.from('out'), encodeTrailer(newChannelKey(), exit)], key);
    assert.equal(r.end, undefined);
    assert.ok(r.output.startsWith('out\n\x1esandpit-exit '));
  });

  // The v1.20 kubelet writes its error into a followed log whose container was removed (a pool pod
  // goes as soon as its run ends): found by the hostile tier's long lines on a warm run.
  test("the kubelet's error after the trailer is dropped; more than it could be, or a trailer after it, is output", () => {
    const stream = Buffer.concat([
      Buffer.from('out\n'),
      encodeTrailer(key, exit),
      Buffer.from(KUBELET_ERROR),
    ]);
    for (const withKey of [key, undefined]) {
      for (let size = 1; size <= stream.length; size += 11) {
        const r = filter(chunked(stream, size), withKey);
        assert.equal(r.output, 'out\n', `chunks of ${size}`);
        assert.deepEqual(r.end, exit);
      }
    }
    const long = 'z'.repeat(MAX_TRAILER_BYTES + 1);
    const outlived = filter([Buffer.from('out'), encodeTrailer(key, exit), Buffer.from(long)], key);
    assert.equal(outlived.end, undefined);
    assert.ok(outlived.output.endsWith(long));
    const forged = encodeTrailer(newChannelKey(), exit);
    const r = filter([
      Buffer.concat([forged, Buffer.from('y'), encodeTrailer(key, exit), Buffer.from(KUBELET_ERROR)]),
    ]);
    assert.equal(r.output, `${forged.toString()}y`);
    assert.deepEqual(r.end, exit);
  });

  // The kubelet reads stdout and stderr on their own: the program's last stderr line can land in
  // the log after the trailer, which goes on stdout (seen under load on the test cluster).
  test('stderr bytes the log has after the trailer are output; the kubelet’s error after them is not', () => {
    for (const tail of ['', KUBELET_ERROR]) {
      const stream = Buffer.concat([
        Buffer.from('out\n'),
        encodeTrailer(key, exit),
        Buffer.from(`err\n${tail}`),
      ]);
      for (const withKey of [key, undefined]) {
        for (let size = 1; size <= stream.length; size += 13) {
          const r = filter(chunked(stream, size), withKey);
          assert.equal(
            r.output,
            'out\nerr\n',
            `chunks of ${size}, ${tail ? 'with' : 'without'} the kubelet's error`,
          );
          assert.deepEqual(r.end, exit);
        }
      }
    }
  });
});
