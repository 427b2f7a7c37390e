// A run's output from its pod log: a warm run's without the runner's exit trailer (byte for byte a
// cold run's), and the fast finish from an exact status tail, consistent with what was streamed.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { LogOutput, MAX_COMPARED_BYTES } from '../../../../src/backends/kubernetes/log-output.js';
import { encodeTrailer } from '../../../../src/runner/exit-trailer.js';
import { ExitReportSchema } from '../../../../src/runner/protocol.js';

const window = { headBytes: 1 << 20, tailBytes: 1 << 16 };
const report = ExitReportSchema.parse({ exitCode: 0, signal: 0, stdoutBytes: 6, stderrBytes: 0 });
const trailer = encodeTrailer(randomBytes(16), { kind: 'exit', report });

function follow(chunks: Buffer[], warm: boolean): { text: string; streamed: string; bytes: number } {
  const streamed: Buffer[] = [];
  const out = new LogOutput(window, (c) => streamed.push(c.data));
  if (warm) out.expectTrailer();
  for (const c of chunks) out.addLog(c);
  const captured = out.finish();
  return { text: captured.text, streamed: Buffer.concat(streamed).toString(), bytes: captured.bytes };
}

/** `data` cut into pieces of `size` bytes. */
function pieces(data: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < data.length; i += size) out.push(data.subarray(i, i + size));
  return out;
}

describe('LogOutput: a warm run shows exactly what a cold run shows', () => {
  for (const program of ['hello\n', 'no newline at the end', '', 'a\n\nb\n\n']) {
    test(`${JSON.stringify(program)}, the log in pieces of every size`, () => {
      const cold = follow([Buffer.from(program)], false);
      assert.equal(cold.text, program);
      const log = Buffer.concat([Buffer.from(program), trailer]);
      for (const size of [1, 2, 7, 64, log.length]) {
        const warm = follow(pieces(log, size), true);
        assert.equal(warm.text, program, `pieces of ${size}`);
        assert.equal(warm.streamed, program, `streamed in pieces of ${size}`);
        assert.equal(warm.bytes, Buffer.byteLength(program));
      }
    });
  }

  test("a cold run's output is never filtered, even when it prints a line that looks like a trailer", () => {
    const looksLike = Buffer.concat([Buffer.from('out'), trailer]);
    assert.equal(follow([looksLike], false).text, looksLike.toString());
  });

  test('a warm log that ends without its trailer (cut short) keeps every byte it had', () => {
    const cut = Buffer.concat([Buffer.from('out\n'), trailer.subarray(0, 10)]);
    const r = follow(pieces(cut, 3), true);
    assert.equal(r.streamed, cut.toString());
    assert.equal(r.bytes, cut.length);
  });
});

describe('LogOutput.finishWith: the whole output from the status, before the log ends', () => {
  test('what was streamed is its start: the rest is streamed, and later log bytes are ignored', () => {
    const chunks: string[] = [];
    const out = new LogOutput(window, (c) => chunks.push(c.data.toString()));
    out.expectTrailer();
    out.addLog(Buffer.from('line 1\nline'));
    assert.equal(out.finishWith(Buffer.from('line 1\nline 2\n')), true);
    out.addLog(Buffer.from(' 2\n'));
    out.addLog(trailer);
    assert.equal(out.finish().text, 'line 1\nline 2\n');
    // The held-back newline of "line 1\n" is not streamed twice.
    assert.equal(chunks.join(''), 'line 1\nline 2\n');
  });

  test('nothing streamed yet: all of it', () => {
    const chunks: string[] = [];
    const out = new LogOutput(window, (c) => chunks.push(c.data.toString()));
    assert.equal(out.finishWith(Buffer.from('all\n')), true);
    assert.equal(out.finish(4).text, 'all\n');
    assert.deepEqual(chunks, ['all\n']);
  });

  test('what was streamed is not its start (another interleaving, more bytes): refused, nothing changed', () => {
    const out = new LogOutput(window, () => undefined);
    out.addLog(Buffer.from('err\nout\n'));
    assert.equal(out.finishWith(Buffer.from('out\nerr\n')), false);
    assert.equal(out.finishWith(Buffer.from('err\n')), false);
    out.addLog(Buffer.from('more\n'));
    assert.equal(out.finish().text, 'err\nout\nmore\n');
  });

  test('more streamed than is kept for comparing: refused', () => {
    const big = Buffer.alloc(MAX_COMPARED_BYTES + 1, 'x');
    const out = new LogOutput({ headBytes: 1 << 21, tailBytes: 1 << 16 }, () => undefined);
    out.addLog(big);
    assert.equal(out.finishWith(Buffer.concat([big, Buffer.from('\n')])), false);
  });
});
