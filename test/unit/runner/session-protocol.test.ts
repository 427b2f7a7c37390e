/**
 * The session record decoder reads bytes however they are split (a Docker attach stream hands
 * over pieces of any size): the same records, the same skipped-byte count, and the data of every
 * record intact, including forged bytes and partial keys between records.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  BULK_REC_DATA,
  KEY_BYTES,
  newKey,
  REC_DATA,
  REC_HEAD,
  SessionRecordDecoder,
  type SessionRecord,
} from '../../../src/runner/session-protocol.js';

function record(key: Buffer, type: string, id: number, data: Buffer): Buffer {
  const head = Buffer.alloc(REC_HEAD);
  key.copy(head);
  head.write(type, KEY_BYTES, 'latin1');
  head.writeUInt32BE(id, KEY_BYTES + 2);
  head.writeUInt16BE(data.length, REC_HEAD - 2);
  return Buffer.concat([head, data]);
}

/** A deterministic pseudo-random source, so that a failure can be replayed. */
function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return Math.floor((s / 2 ** 32) * n); // the high bits: an LCG's low ones repeat with a short period
  };
}

const key = newKey();
const rand = rng(14);

/**
 * A channel's bytes: `count` records of every size class, output and bulk data, with what a
 * program could write into the channel between them (a key prefix, or a record under another key).
 */
function channel(count: number) {
  const expected: { type: string; id: number; data: string }[] = [];
  const parts: Buffer[] = [];
  let forged = 0;
  for (let i = 0; i < count; i++) {
    // Output records of up to PIPE_BUF, and a bulk read's data records of up to 64 KiB.
    const type = rand(2) ? 'O' : 'd';
    const cap = type === 'd' ? BULK_REC_DATA : REC_DATA;
    const size = [0, 1, cap, rand(cap)][rand(4)]!;
    const data = Buffer.alloc(size, i & 0xff);
    parts.push(record(key, type, i, data));
    expected.push({ type, id: i, data: data.toString('latin1') });
    if (rand(5) === 0) {
      const junk = rand(2) ? key.subarray(0, 1 + rand(KEY_BYTES - 1)) : record(newKey(), 'd', 9, data);
      parts.push(junk);
      forged += junk.length;
    }
  }
  return { stream: Buffer.concat(parts), expected, forged };
}

const long = channel(300);
// Pieces smaller than a header: 40 records, since every piece of a bulk record is a record of its own.
const short = channel(40);

/** The records decoded from `pieces`; the pieces a 'd' record streams out in are joined again. */
function decode(pieces: Buffer[]): { records: Omit<SessionRecord, 'more'>[]; skipped: number } {
  const d = new SessionRecordDecoder(key);
  // Each record's pieces (views of the pushed bytes), joined once at the end: joining them as they
  // come is quadratic in 1-byte pieces.
  const records: { type: string; id: number; data: Buffer[] }[] = [];
  for (const p of pieces)
    for (const r of d.push(p)) {
      const last = records.at(-1);
      if (r.type === 'd' && last?.type === 'd' && last.id === r.id) last.data.push(r.data);
      else records.push({ type: r.type, id: r.id, data: [r.data] });
    }
  return { records: records.map((r) => ({ ...r, data: Buffer.concat(r.data) })), skipped: d.skippedBytes };
}

function check(pieces: Buffer[], what: string, { expected, forged } = long): void {
  const { records, skipped } = decode(pieces);
  assert.deepEqual(
    records.map((r) => ({ type: r.type, id: r.id, data: r.data.toString('latin1') })),
    expected,
    what,
  );
  assert.equal(skipped, forged, `${what}: skipped bytes`);
}

function piecesOf(stream: Buffer, size: number): Buffer[] {
  const pieces: Buffer[] = [];
  for (let off = 0; off < stream.length; off += size) pieces.push(stream.subarray(off, off + size));
  return pieces;
}

test('whole, or in pieces of every size class: the same records and skipped bytes', () => {
  check([long.stream], 'whole');
  for (const size of [1, 7, KEY_BYTES, REC_HEAD + 1])
    check(piecesOf(short.stream, size), `pieces of ${size}`, short);
  for (const size of [REC_HEAD + 1, 4095, 4096, 4097, 32 * 1024, 65_536, 200_000])
    check(piecesOf(long.stream, size), `pieces of ${size}`);
});

test('split at random points: the same records and skipped bytes', () => {
  for (let round = 0; round < 50; round++) {
    const pieces: Buffer[] = [];
    for (let off = 0; off < long.stream.length;) {
      const n = 1 + rand([20, 5000, 70_000][rand(3)]!);
      pieces.push(long.stream.subarray(off, off + n));
      off += n;
    }
    check(pieces, `round ${round}`);
  }
});

test('a record longer than its type may be throws, wherever the split falls', () => {
  for (const [type, len] of [
    ['O', REC_DATA + 1],
    ['A', REC_DATA + 1],
    ['d', BULK_REC_DATA + 1],
  ] as const) {
    const bad = record(key, type, 1, Buffer.alloc(10));
    bad.writeUInt16BE(len, REC_HEAD - 2);
    for (let k = 1; k < REC_HEAD; k++) {
      const d = new SessionRecordDecoder(key);
      assert.throws(
        () => {
          d.push(bad.subarray(0, k));
          d.push(bad.subarray(k));
        },
        /too large/,
        `${type} of ${len}, split at ${k}`,
      );
    }
  }
});

test('a bulk record split across chunks comes out as views of them, a small one joined', () => {
  const d = new SessionRecordDecoder(key);
  const bulk = record(key, 'd', 1, Buffer.alloc(BULK_REC_DATA, 1));
  const small = record(key, 'O', 2, Buffer.from('split in two'));
  const whole = record(key, 'O', 3, Buffer.from('whole'));
  const wire = Buffer.concat([bulk, small, whole]);
  const cut = bulk.length + REC_HEAD + 3; // inside the small record's data
  const first = d.push(wire.subarray(0, 30_000));
  const second = d.push(wire.subarray(30_000, cut));
  const third = d.push(wire.subarray(cut));
  const pieces = [...first, ...second].filter((r) => r.id === 1);
  assert.deepEqual(
    pieces.map((r) => r.data.length),
    [30_000 - REC_HEAD, BULK_REC_DATA - (30_000 - REC_HEAD)],
  );
  for (const p of pieces) assert.equal(p.data.buffer, wire.buffer, 'a view of the pushed bytes');
  assert.ok(pieces.every((p) => p.data.every((x) => x === 1)));
  assert.deepEqual(
    third.map((r) => [r.id, r.data.toString()]),
    [
      [2, 'split in two'],
      [3, 'whole'],
    ],
  );
  assert.notEqual(third[0]!.data.buffer, wire.buffer, 'the split small record was joined');
  assert.equal(third[1]!.data.buffer, wire.buffer);
});
