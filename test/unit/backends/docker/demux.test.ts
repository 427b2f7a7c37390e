import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DockerDemuxer } from '../../../../src/backends/docker/demux.js';

/** One multiplexed frame: [stream, 0, 0, 0, size u32be] + payload. */
function mux(stream: number, payload: string | Buffer): Buffer {
  const data = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const hdr = Buffer.alloc(8);
  hdr[0] = stream;
  hdr.writeUInt32BE(data.length, 4);
  return Buffer.concat([hdr, data]);
}

function collect(): { d: DockerDemuxer; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    d: new DockerDemuxer(
      (b) => out.push(b.toString('latin1')),
      (b) => err.push(b.toString('latin1')),
    ),
    out,
    err,
  };
}

const stream = Buffer.concat([
  mux(1, 'first'),
  mux(2, 'diag'),
  mux(1, Buffer.from([0, 255, 1])),
  mux(2, ''),
  mux(1, 'last'),
]);

test('frames go to stdout (1) and stderr (2) in order', () => {
  const { d, out, err } = collect();
  d.push(stream);
  assert.deepEqual(out, ['first', '\u0000\u00ff\u0001', 'last']);
  assert.deepEqual(err, ['diag', '']);
});

test('split in two at every byte boundary: the same payloads', () => {
  for (let k = 0; k <= stream.length; k++) {
    const { d, out, err } = collect();
    d.push(stream.subarray(0, k));
    d.push(stream.subarray(k));
    assert.deepEqual(out, ['first', '\u0000\u00ff\u0001', 'last'], `split at ${k}`);
    assert.deepEqual(err, ['diag', '']);
  }
});

test('one byte at a time', () => {
  const { d, out, err } = collect();
  for (let i = 0; i < stream.length; i++) d.push(stream.subarray(i, i + 1));
  assert.deepEqual(out, ['first', '\u0000\u00ff\u0001', 'last']);
  assert.deepEqual(err, ['diag', '']);
});

test('an incomplete frame waits for the rest', () => {
  const { d, out } = collect();
  const f = mux(1, 'abcdef');
  d.push(f.subarray(0, 10));
  assert.deepEqual(out, []);
  d.push(f.subarray(10));
  assert.deepEqual(out, ['abcdef']);
});

test('stream 0 (stdin echo) counts as stdout; only 2 is stderr', () => {
  const { d, out, err } = collect();
  d.push(Buffer.concat([mux(0, 'zero'), mux(3, 'three')]));
  assert.deepEqual(out, ['zero', 'three']);
  assert.deepEqual(err, []);
});

test('a large payload arrives whole', () => {
  const { d, out } = collect();
  const big = Buffer.alloc(200_000, 0x61);
  const f = mux(1, big);
  for (let off = 0; off < f.length; off += 4096) d.push(f.subarray(off, off + 4096));
  assert.equal(out.length, 1);
  assert.equal(out[0]!.length, 200_000);
});
