import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  encodeJob,
  FrameDecoder,
  outputWindow,
  PROTOCOL_VERSION,
  type Frame,
} from '../../../src/runner/protocol.js';
import type { EffectiveSpec } from '../../../src/policy/evaluate.js';
import { frame } from '../../support/runner-frames.js';

function spec(
  overrides: Partial<EffectiveSpec> = {},
  limits: Partial<EffectiveSpec['limits']> = {},
): EffectiveSpec {
  return {
    template: undefined,
    image: 'x:1',
    argv: ['sh', '-c'],
    code: undefined,
    files: [],
    stdin: Buffer.alloc(0),
    env: [],
    limits: {
      cpuMilli: 1000,
      memoryBytes: 1,
      pids: 1,
      workspaceBytes: 1,
      tmpBytes: 1,
      timeoutSeconds: 2,
      outputBytes: 11,
      fileSizeBytes: 1,
      openFiles: 1,
      ...limits,
    },
    network: 'none',
    runtime: undefined,
    workdir: '/w',
    ...overrides,
  };
}

const bytes = (...parts: (string | number[] | Buffer)[]): Buffer =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));

describe('outputWindow', () => {
  const cases: [number, number, number][] = [
    [0, 0, 0],
    [1, 1, 0],
    [2, 1, 1],
    [11, 6, 5],
    [1024 * 1024, 512 * 1024, 512 * 1024],
  ];
  for (const [total, head, tail] of cases) {
    test(`${total} → head ${head}, tail ${tail}`, () => {
      assert.deepEqual(outputWindow(total), { headBytes: head, tailBytes: tail });
    });
  }
});

describe('encodeJob', () => {
  test('a small spec, byte by byte', () => {
    const job = encodeJob(
      spec({
        env: [{ name: 'A', value: '1' }],
        files: [{ path: 'f', content: Buffer.from('xy'), executable: true }],
        code: { path: '/sandpit/code/main.sh', content: Buffer.from('c') },
        stdin: Buffer.from('i'),
      }),
    );
    // prettier-ignore
    const body = bytes(
      'a', [0, 0, 0, 2], 'sh',
      'a', [0, 0, 0, 2], '-c',
      'e', [0, 0, 0, 3], 'A=1',
      'w', [0, 0, 0, 2], '/w',
      't', [0, 0, 0, 4], [0, 0, 0x07, 0xd0], // 2000 ms
      'o', [0, 0, 0, 8], [0, 0, 0, 6], [0, 0, 0, 5], // head 6, tail 5
      'f', [0, 0, 0, 6], [1], [0, 1], 'f', 'xy',
      'c', [0, 0, 0, 1], 'c',
      'i', [0, 0, 0, 1], 'i',
    );
    assert.equal(body.length, 74);
    assert.deepEqual(job, bytes('SPJ1', [0, 0, 0, 74], body));
  });

  test('no code and no stdin: no c or i records; a non-executable file has flag 0', () => {
    const job = encodeJob(
      spec(
        { argv: ['true'], files: [{ path: 'dir/é', content: Buffer.alloc(0), executable: false }] },
        { outputBytes: 0, timeoutSeconds: 1 },
      ),
    );
    const path = Buffer.from('dir/é');
    // prettier-ignore
    const body = bytes(
      'a', [0, 0, 0, 4], 'true',
      'w', [0, 0, 0, 2], '/w',
      't', [0, 0, 0, 4], [0, 0, 0x03, 0xe8],
      'o', [0, 0, 0, 8], [0, 0, 0, 0], [0, 0, 0, 0],
      'f', [0, 0, 0, 3 + path.length], [0], [0, path.length], [...path],
    );
    assert.deepEqual(job, bytes('SPJ1', [0, 0, 0, body.length], body));
  });

  test('argv and env keep their order; the deadline of a long run fits', () => {
    const job = encodeJob(
      spec(
        {
          argv: ['1', '2', '3'],
          env: [
            { name: 'B', value: 'x=y' },
            { name: 'A', value: '' },
          ],
        },
        { timeoutSeconds: 86_400 },
      ),
    );
    const records: [string, string][] = [];
    for (let off = 8; off < job.length;) {
      const len = job.readUInt32BE(off + 1);
      records.push([String.fromCharCode(job[off]!), job.subarray(off + 5, off + 5 + len).toString('latin1')]);
      off += 5 + len;
    }
    assert.deepEqual(
      records.filter(([t]) => t === 'a' || t === 'e').map(([t, v]) => `${t}:${v}`),
      ['a:1', 'a:2', 'a:3', 'e:B=x=y', 'e:A='],
    );
    const t = records.find(([type]) => type === 't')!;
    assert.equal(Buffer.from(t[1], 'latin1').readUInt32BE(0), 86_400_000);
    assert.equal(job.readUInt32BE(4), job.length - 8);
  });

  test('binary file content and code travel unchanged', () => {
    const content = Buffer.from([0, 255, 10, 13, 0x80]);
    const job = encodeJob(
      spec({ files: [{ path: 'b', content, executable: false }], code: { path: '/x', content } }),
    );
    const tail = job.subarray(job.length - 5 - content.length);
    assert.deepEqual(tail, Buffer.concat([Buffer.from([0x63, 0, 0, 0, 5]), content]));
  });
});

describe('FrameDecoder', () => {
  const exit = {
    exitCode: 3,
    signal: 0,
    timedOut: false,
    oomKilled: true,
    stdoutBytes: 10,
    stderrBytes: 4,
    durationMs: 12,
  };
  const stream = Buffer.concat([
    frame('R'),
    frame('O', 'hello'),
    frame('E', 'err'),
    frame('O', ''),
    frame('T', Buffer.concat([Buffer.from([1]), Buffer.from('tail-out')])),
    frame('T', Buffer.concat([Buffer.from([2]), Buffer.from('tail-err')])),
    frame('F', 'runner broke: ü'),
    frame('X', JSON.stringify(exit)),
  ]);
  const want: Frame[] = [
    { type: 'ready', version: 1 },
    { type: 'stdout', data: Buffer.from('hello') },
    { type: 'stderr', data: Buffer.from('err') },
    { type: 'stdout', data: Buffer.alloc(0) },
    { type: 'tail', stream: 'stdout', data: Buffer.from('tail-out') },
    { type: 'tail', stream: 'stderr', data: Buffer.from('tail-err') },
    { type: 'failure', message: 'runner broke: ü' },
    { type: 'exit', report: exit },
  ];

  test('one push with every frame type', () => {
    const d = new FrameDecoder();
    assert.deepEqual(d.push(stream), want);
    assert.equal(d.pendingBytes, 0);
  });

  test('split in two at every byte boundary', () => {
    for (let k = 0; k <= stream.length; k++) {
      const d = new FrameDecoder();
      const got = [...d.push(stream.subarray(0, k)), ...d.push(stream.subarray(k))];
      assert.deepEqual(got, want, `split at ${k}`);
      assert.equal(d.pendingBytes, 0);
    }
  });

  test('one byte at a time', () => {
    const d = new FrameDecoder();
    const got: Frame[] = [];
    for (let i = 0; i < stream.length; i++) {
      got.push(...d.push(stream.subarray(i, i + 1)));
      assert.ok(d.pendingBytes < 5 + JSON.stringify(exit).length, `pending ${d.pendingBytes}`);
    }
    assert.deepEqual(got, want);
  });

  test('pendingBytes counts an incomplete frame', () => {
    const d = new FrameDecoder();
    assert.deepEqual(d.push(frame('O', 'abcdef').subarray(0, 7)), []);
    assert.equal(d.pendingBytes, 7);
    assert.deepEqual(d.push(Buffer.from('cdef')), [{ type: 'stdout', data: Buffer.from('abcdef') }]);
    assert.equal(d.pendingBytes, 0);
  });

  test('an exit report without its optional fields reads them as zeros and false', () => {
    const d = new FrameDecoder();
    assert.deepEqual(d.push(frame('X', '{"exitCode":1,"signal":9}')), [
      {
        type: 'exit',
        report: {
          exitCode: 1,
          signal: 9,
          timedOut: false,
          oomKilled: false,
          stdoutBytes: 0,
          stderrBytes: 0,
          durationMs: 0,
        },
      },
    ]);
  });

  test('an exit report with a missing or mistyped field throws: it is never read as a success', () => {
    for (const bad of [
      '{}',
      '{"exitCode":"0"}',
      '{"exitCode":0,"timedOut":"true"}',
      '{"exitCode":0,"oomKilled":1}',
      'null',
    ])
      assert.throws(() => new FrameDecoder().push(frame('X', bad)), Error, bad);
  });

  test('the ready frame carries the protocol version; a runner that sends none speaks version 1', () => {
    const v = Buffer.alloc(4);
    v.writeUInt32BE(PROTOCOL_VERSION);
    assert.deepEqual(new FrameDecoder().push(frame('R', v)), [{ type: 'ready', version: PROTOCOL_VERSION }]);
    assert.deepEqual(new FrameDecoder().push(frame('R')), [{ type: 'ready', version: 1 }]);
  });

  test('an unknown frame type throws, naming the byte', () => {
    assert.throws(() => new FrameDecoder().push(frame('Z', 'x')), /unknown runner frame type 0x5a/);
    assert.throws(() => new FrameDecoder().push(frame('o', 'x')), /unknown runner frame type 0x6f/);
  });

  test('an exit frame that is not JSON throws', () => {
    assert.throws(() => new FrameDecoder().push(frame('X', '{not json')), SyntaxError);
  });

  test('an oversized frame throws as soon as its header arrives', () => {
    const hdr = Buffer.from([0x4f, 0x04, 0x00, 0x00, 0x01]); // 64 MiB + 1
    assert.throws(() => new FrameDecoder().push(hdr), /runner frame of 67108865 bytes is too large/);
    const max = Buffer.from([0x4f, 0x04, 0x00, 0x00, 0x00]); // exactly 64 MiB: waits for the payload
    const d = new FrameDecoder();
    assert.deepEqual(d.push(max), []);
    assert.equal(d.pendingBytes, 5);
  });

  test('an oversized header behind a good frame still throws', () => {
    const buf = Buffer.concat([frame('O', 'ok'), Buffer.from([0x4f, 0xff, 0xff, 0xff, 0xff])]);
    assert.throws(() => new FrameDecoder().push(buf), /too large/);
  });
});
