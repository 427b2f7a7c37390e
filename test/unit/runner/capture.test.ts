import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { looksBinary, StreamCapture } from '../../../src/runner/capture.js';

const b = (s: string): Buffer => Buffer.from(s, 'utf8');
const cap = (headBytes: number, tailBytes: number): StreamCapture =>
  new StreamCapture({ headBytes, tailBytes });

describe('StreamCapture: head and tail', () => {
  test('output that fits is kept whole', () => {
    const c = cap(4, 4);
    assert.deepEqual(c.add(b('abc')), b('abc'));
    assert.deepEqual(c.finish(3), { text: 'abc', bytes: 3, truncated: false, binary: false });
  });

  test('empty output', () => {
    assert.deepEqual(cap(4, 4).finish(), { text: '', bytes: 0, truncated: false, binary: false });
    assert.deepEqual(cap(4, 4).finish(0), { text: '', bytes: 0, truncated: false, binary: false });
  });

  test('add returns only the part that fits in the head', () => {
    const c = cap(5, 0);
    assert.deepEqual(c.add(b('abc')), b('abc'));
    assert.deepEqual(c.add(b('defg')), b('de'));
    assert.deepEqual(c.add(b('hij')), Buffer.alloc(0));
    const r = c.finish();
    assert.equal(r.bytes, 10);
    assert.equal(r.truncated, true);
    assert.equal(r.text, 'abcde\n[… 5 bytes truncated …]\n');
  });

  test('live bytes past the head fill the tail, keeping the last ones', () => {
    const c = cap(4, 4);
    assert.deepEqual(c.add(b('abcdefghij')), b('abcd'));
    assert.deepEqual(c.finish(), {
      text: 'abcd\n[… 2 bytes truncated …]\nghij',
      bytes: 10,
      truncated: true,
      binary: false,
    });
  });

  test('exactly head + tail bytes is not truncated, and is contiguous', () => {
    const c = cap(4, 4);
    c.add(b('abcd'));
    c.add(b('efgh'));
    assert.deepEqual(c.finish(8), { text: 'abcdefgh', bytes: 8, truncated: false, binary: false });
  });

  test('one byte over head + tail is truncated by exactly one byte', () => {
    const c = cap(4, 4);
    c.add(b('abcdefghi'));
    assert.deepEqual(c.finish(), {
      text: 'abcd\n[… 1 bytes truncated …]\nfghi',
      bytes: 9,
      truncated: true,
      binary: false,
    });
  });

  test('the runner’s way: head live, tail at the end, total from the exit report', () => {
    const c = cap(6, 5);
    c.add(b('first-'));
    c.addTail(b('-last'));
    assert.deepEqual(c.finish(1_000_000), {
      text: `first-\n[… ${1_000_000 - 11} bytes truncated …]\n-last`,
      bytes: 1_000_000,
      truncated: true,
      binary: false,
    });
  });

  test('a runner tail that just continues the head is not truncated', () => {
    const c = cap(6, 5);
    c.add(b('abcdef'));
    c.addTail(b('ghi'));
    assert.deepEqual(c.finish(9), { text: 'abcdefghi', bytes: 9, truncated: false, binary: false });
  });

  test('a tail longer than the window keeps only its last tailBytes', () => {
    const c = cap(2, 3);
    c.add(b('ab'));
    c.addTail(b('uvwxyz'));
    const r = c.finish(20);
    assert.equal(r.text, 'ab\n[… 15 bytes truncated …]\nxyz');
  });

  test('bytes is the largest of the reported total, bytes seen and bytes kept', () => {
    const c = cap(4, 4);
    c.add(b('abcdef'));
    assert.equal(c.finish(2).bytes, 6); // a runner report lower than what we saw
    const d = cap(4, 4);
    d.add(b('ab'));
    d.addTail(b('yz'));
    assert.equal(d.finish().bytes, 4);
  });

  test('memory held is bounded by the window whatever is added', () => {
    const c = cap(8, 8);
    for (let i = 0; i < 10_000; i++) c.add(Buffer.alloc(1024, 0x61));
    const r = c.finish();
    assert.equal(r.bytes, 10_240_000);
    assert.equal(r.truncated, true);
    assert.equal(r.text, `aaaaaaaa\n[… ${10_240_000 - 16} bytes truncated …]\naaaaaaaa`);
  });

  test('a zero window keeps nothing and counts everything', () => {
    const c = cap(0, 0);
    assert.deepEqual(c.add(b('hello')), Buffer.alloc(0));
    assert.deepEqual(c.finish(), {
      text: '\n[… 5 bytes truncated …]\n',
      bytes: 5,
      truncated: true,
      binary: false,
    });
  });
});

describe('StreamCapture: binary output', () => {
  test('a NUL byte makes it binary, summarised with its size', () => {
    const c = cap(100, 100);
    c.add(Buffer.from([0x68, 0x69, 0x00, 0x21]));
    assert.deepEqual(c.finish(4), {
      text: '[binary output: 4 bytes, not shown]',
      bytes: 4,
      truncated: false,
      binary: true,
    });
  });

  test('binary in the tail only is still binary, and truncation is still reported', () => {
    const c = cap(4, 4);
    c.add(b('text'));
    c.addTail(Buffer.from([0xff, 0xfe, 0xfd, 0xfc]));
    assert.deepEqual(c.finish(50), {
      text: '[binary output: 50 bytes, not shown]',
      bytes: 50,
      truncated: true,
      binary: true,
    });
  });

  test('a multi-byte character cut between head and tail is NOT binary', () => {
    for (const ch of ['é', '€', '😀']) {
      const bytes = b(`ab${ch}cd`);
      for (let cut = 3; cut < 2 + Buffer.byteLength(ch); cut++) {
        const c = cap(cut, bytes.length - cut);
        c.add(bytes.subarray(0, cut));
        c.addTail(bytes.subarray(cut));
        const r = c.finish(bytes.length);
        assert.equal(r.binary, false, `${ch} cut at ${cut}`);
        assert.equal(r.text, `ab${ch}cd`);
      }
    }
  });

  test('a multi-byte character cut at the truncation point is NOT binary', () => {
    const c = cap(3, 3);
    c.add(b('aé')); // 3 bytes: fits
    c.add(b('€€€€')); // head full; the tail keeps the last 3 bytes: one whole €
    const r = c.finish();
    assert.equal(r.binary, false);
    assert.equal(r.truncated, true);
    assert.equal(r.text, `aé\n[… 9 bytes truncated …]\n€`);
    const d = cap(2, 2);
    d.add(b('a€')); // head = 'a' + first byte of €
    d.addTail(b('€').subarray(1)); // tail = the last two bytes of a €
    assert.equal(d.finish(100).binary, false);
  });
});

describe('looksBinary', () => {
  const cases: [string, Buffer, boolean][] = [
    ['empty', Buffer.alloc(0), false],
    ['ASCII text', b('hello world\n'), false],
    ['UTF-8 text', b('héllo wörld, 你好, 😀\n'), false],
    ['tabs, CR, LF, FF and ANSI colours', b('\x1b[31mred\x1b[0m\tx\r\n\f'), false],
    ['a NUL', Buffer.from([0x61, 0x00, 0x62]), true],
    ['a single NUL', Buffer.from([0x00]), true],
    ['0xff', Buffer.from([0x61, 0xff, 0x62]), true],
    ['a lone continuation byte in the middle', Buffer.from([0x61, 0x62, 0x80, 0x63, 0x64]), true],
    ['a lead byte followed by ASCII', Buffer.from([0x61, 0xc3, 0x62]), true],
    ['an overlong encoding', Buffer.from([0x61, 0xc0, 0xaf, 0x62]), true],
    ['a UTF-16 surrogate encoded in UTF-8', Buffer.from([0x61, 0xed, 0xa0, 0x80, 0x62]), true],
    ['four continuation bytes at the start', Buffer.from([0x80, 0x80, 0x80, 0x80, 0x61]), true],
    ['a character cut at the end (2 of 4 bytes)', Buffer.concat([b('ab'), b('😀').subarray(0, 2)]), false],
    ['a character cut at the end (lead only)', Buffer.concat([b('ab'), b('é').subarray(0, 1)]), false],
    [
      'a character cut at the start (last 3 of 4 bytes)',
      Buffer.concat([b('😀').subarray(1), b('ab')]),
      false,
    ],
    [
      'a character cut at both ends',
      Buffer.concat([b('€').subarray(2), b('middle'), b('€').subarray(0, 2)]),
      false,
    ],
    ['just a lead byte', Buffer.from([0xe2]), false],
    ['a bell in short text (over 1%)', b('ding\x07'), true],
    [
      'one control character in 200 bytes (under 1%)',
      Buffer.concat([b('x'.repeat(199)), Buffer.from([0x01])]),
      false,
    ],
    [
      'three control characters in 200 bytes (over 1%)',
      Buffer.concat([b('x'.repeat(197)), Buffer.from([1, 2, 3])]),
      true,
    ],
    ['DEL is not counted as control', b('a\x7fb'), false],
  ];
  for (const [name, buf, want] of cases) {
    test(`${name} → ${want ? 'binary' : 'text'}`, () => assert.equal(looksBinary(buf), want));
  }
});
