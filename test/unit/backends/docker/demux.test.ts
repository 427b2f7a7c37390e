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

/**
 * What came out, as runs of one stream: a payload may come out in pieces (as it arrived), so
 * consecutive pieces of the same stream are joined.
 */
function collect(): { d: DockerDemuxer; runs: [string, string][]; pieces: Buffer[] } {
  const runs: [string, string][] = [];
  const pieces: Buffer[] = [];
  const add = (name: string) => (b: Buffer) => {
    pieces.push(b);
    const last = runs.at(-1);
    if (last?.[0] === name) last[1] += b.toString('latin1');
    else runs.push([name, b.toString('latin1')]);
  };
  return { d: new DockerDemuxer(add('out'), add('err')), runs, pieces };
}

const stream = Buffer.concat([
  mux(1, 'first'),
  mux(2, 'diag'),
  mux(1, Buffer.from([0, 255, 1])),
  mux(2, ''),
  mux(1, 'last'),
]);
const expected = [
  ['out', 'first'],
  ['err', 'diag'],
  ['out', '\u0000\u00ff\u0001'],
  ['err', ''],
  ['out', 'last'],
];

test('frames go to stdout (1) and stderr (2) in order', () => {
  const { d, runs } = collect();
  d.push(stream);
  assert.deepEqual(runs, expected);
});

test('split in two at every byte boundary: the same bytes, in the same order', () => {
  for (let k = 0; k <= stream.length; k++) {
    const { d, runs } = collect();
    d.push(stream.subarray(0, k));
    d.push(stream.subarray(k));
    assert.deepEqual(runs, expected, `split at ${k}`);
  }
});

test('one byte at a time', () => {
  const { d, runs } = collect();
  for (let i = 0; i < stream.length; i++) d.push(stream.subarray(i, i + 1));
  assert.deepEqual(runs, expected);
});

test('a payload is handed on as it arrives, and nothing of the next header with it', () => {
  const { d, runs } = collect();
  const f = Buffer.concat([mux(1, 'abcdef'), mux(2, 'x')]);
  d.push(f.subarray(0, 10));
  assert.deepEqual(runs, [['out', 'ab']]);
  d.push(f.subarray(10, 16));
  assert.deepEqual(runs, [['out', 'abcdef']]);
  d.push(f.subarray(16));
  assert.deepEqual(runs, [
    ['out', 'abcdef'],
    ['err', 'x'],
  ]);
});

test('stream 0 (stdin echo) counts as stdout; only 2 is stderr', () => {
  const { d, runs } = collect();
  d.push(Buffer.concat([mux(0, 'zero'), mux(3, 'three')]));
  assert.deepEqual(runs, [['out', 'zerothree']]);
});

test('a large payload comes out as views of the chunks it arrived in, none copied', () => {
  const { d, runs, pieces } = collect();
  const big = Buffer.alloc(200_000, 0x61);
  const f = mux(1, big);
  const chunks: Buffer[] = [];
  for (let off = 0; off < f.length; off += 4096) chunks.push(f.subarray(off, off + 4096));
  for (const c of chunks) d.push(c);
  assert.equal(runs.length, 1);
  assert.equal(runs[0]![1].length, 200_000);
  for (const p of pieces) assert.equal(p.buffer, f.buffer, 'a view of the pushed bytes');
});
