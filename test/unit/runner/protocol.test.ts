import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  EGRESS_SOCKET_PATH,
  encodeJob,
  FILE_RECORD_DATA,
  FrameDecoder,
  KEY_BYTES,
  newChannelKey,
  outputWindow,
  PROTOCOL_VERSION,
  RECORD_DATA,
  type Frame,
} from '../../../src/runner/protocol.js';
import { NO_OUTPUTS, type EffectiveSpec } from '../../../src/policy/evaluate.js';
import { frame, keyedFrame } from '../../support/runner-frames.js';

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
    network: { egress: 'none' },
    runtime: undefined,
    workdir: '/w',
    outputs: NO_OUTPUTS,
    ...overrides,
  };
}

const bytes = (...parts: (string | number[] | Buffer)[]): Buffer =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));

const KEY = Buffer.from('5be1c0a9f2d3e4b58697a8b9cadbecfd', 'hex');
const keyed = (type: string, data: Buffer | string = Buffer.alloc(0), key = KEY): Buffer =>
  keyedFrame(key, type, data);
const NO_KEY = Buffer.alloc(KEY_BYTES);

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
      'l', [0, 0, 0, 12], [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1], // RLIMIT_FSIZE 1, RLIMIT_NOFILE 1
      'n', [0, 0, 0, 0], // no network: the runner refuses a sandbox with any interface but lo
      'f', [0, 0, 0, 6], [1], [0, 1], 'f', 'xy',
      'c', [0, 0, 0, 1], 'c',
      'i', [0, 0, 0, 1], 'i',
    );
    assert.equal(body.length, 96);
    assert.deepEqual(job, bytes('SPJ3', NO_KEY, [0, 0, 0, 96], body));
  });

  test('no code and no stdin: no c or i records; a non-executable file has flag 0', () => {
    const job = encodeJob(
      spec(
        { argv: ['true'], files: [{ path: 'dir/é', content: Buffer.alloc(0), executable: false }] },
        { outputBytes: 0, timeoutSeconds: 1, fileSizeBytes: 2 ** 32 + 2, openFiles: 1024 },
      ),
      { requireNoNetwork: false },
    );
    const path = Buffer.from('dir/é');
    // prettier-ignore
    const body = bytes(
      'a', [0, 0, 0, 4], 'true',
      'w', [0, 0, 0, 2], '/w',
      't', [0, 0, 0, 4], [0, 0, 0x03, 0xe8],
      'o', [0, 0, 0, 8], [0, 0, 0, 0], [0, 0, 0, 0],
      'l', [0, 0, 0, 12], [0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0x04, 0], // 4 GiB + 2; 1024
      'f', [0, 0, 0, 3 + path.length], [0], [0, path.length], [...path],
    );
    assert.deepEqual(job, bytes('SPJ3', NO_KEY, [0, 0, 0, body.length], body));
  });

  test('outputs: one g record per entry, then G with the caps; none when no entry is asked', () => {
    const outputs = { ...NO_OUTPUTS, entries: ['*.png', 'out/a.csv'] };
    const job = encodeJob(spec({ argv: ['true'], outputs }, { outputBytes: 0 }), { requireNoNetwork: false });
    // prettier-ignore
    const tail = bytes(
      'g', [0, 0, 0, 5], '*.png',
      'g', [0, 0, 0, 9], 'out/a.csv',
      'G', [0, 0, 0, 8], [0, 0, 0, 32], [0x01, 0, 0, 0], // 32 files, 16 MiB
    );
    assert.deepEqual(job.subarray(job.length - tail.length), tail);
    assert.equal(encodeJob(spec()).includes(Buffer.from('G\0\0\0\x08')), false);
  });

  test("egress: the proxy socket's path as a 'p' record after the 'n' record; none without it", () => {
    const plain = encodeJob(spec({ argv: ['true'] }), { requireNoNetwork: true });
    const withEgress = encodeJob(spec({ argv: ['true'] }), {
      requireNoNetwork: true,
      egressSocket: EGRESS_SOCKET_PATH,
    });
    const record = bytes('p', [0, 0, 0, EGRESS_SOCKET_PATH.length], EGRESS_SOCKET_PATH);
    assert.equal(EGRESS_SOCKET_PATH, '/run/sandpit-egress/proxy.sock');
    assert.equal(withEgress.length, plain.length + record.length);
    assert.deepEqual(withEgress.subarray(withEgress.length - record.length), record);
    assert.equal(plain.includes(record), false);
  });

  test("inherited variables: one 'v' record per name, in order, after the others (Kubernetes egress)", () => {
    const plain = encodeJob(spec({ argv: ['true'] }), { requireNoNetwork: false });
    const inheriting = encodeJob(spec({ argv: ['true'] }), {
      requireNoNetwork: false,
      inheritEnv: ['HTTPS_PROXY', 'NO_PROXY'],
    });
    const records = bytes('v', [0, 0, 0, 11], 'HTTPS_PROXY', 'v', [0, 0, 0, 8], 'NO_PROXY');
    assert.equal(inheriting.length, plain.length + records.length);
    assert.deepEqual(inheriting.subarray(inheriting.length - records.length), records);
  });

  test('the channel key follows the magic; a key of any other length is refused', () => {
    const key = newChannelKey();
    assert.equal(key.length, KEY_BYTES);
    assert.notDeepEqual(key, newChannelKey());
    const job = encodeJob(spec(), { key });
    assert.deepEqual(job.subarray(0, 4 + KEY_BYTES), bytes('SPJ3', key));
    assert.throws(() => encodeJob(spec(), { key: Buffer.alloc(8) }), /16 bytes/);
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
    for (let off = 24; off < job.length;) {
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
    assert.equal(job.readUInt32BE(20), job.length - 24);
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

  test('a frame declared at 64 MiB is refused as soon as its header arrives, before any payload is held', () => {
    const hdr = Buffer.from([0x4f, 0x04, 0x00, 0x00, 0x00]); // 64 MiB
    assert.throws(() => new FrameDecoder().push(hdr), /runner frame of 67108864 bytes is too large/);
    const small = Buffer.from([0x4f, 0x00, 0x00, 0x10, 0x00]); // 4 KiB: waits for the payload
    const d = new FrameDecoder();
    assert.deepEqual(d.push(small), []);
    assert.equal(d.pendingBytes, 5);
  });

  test('an oversized header behind a good frame still throws', () => {
    const buf = Buffer.concat([frame('O', 'ok'), Buffer.from([0x4f, 0xff, 0xff, 0xff, 0xff])]);
    assert.throws(() => new FrameDecoder().push(buf), /too large/);
  });
});

describe('FrameDecoder after expectKey()', () => {
  const exit = {
    exitCode: 0,
    signal: 0,
    timedOut: false,
    oomKilled: false,
    stdoutBytes: 2,
    stderrBytes: 0,
    durationMs: 1,
  };
  const decoder = (): FrameDecoder => {
    const d = new FrameDecoder();
    assert.deepEqual(d.push(frame('R', Buffer.from([0, 0, 0, 3]))), [{ type: 'ready', version: 3 }]);
    d.expectKey(KEY);
    return d;
  };
  const records = Buffer.concat([
    keyed('O', 'hi'),
    keyed('T', Buffer.from([2, 0x65])),
    keyed('T', Buffer.from([2, 0x66])),
    keyed('X', JSON.stringify(exit)),
  ]);
  const want: Frame[] = [
    { type: 'stdout', data: Buffer.from('hi') },
    { type: 'tail', stream: 'stderr', data: Buffer.from('e') },
    { type: 'tail', stream: 'stderr', data: Buffer.from('f') },
    { type: 'exit', report: exit },
  ];
  /** What a program under gVisor can write into the runner's stdout: frames of its own, but no key. */
  const forged = Buffer.concat([
    frame('X', JSON.stringify({ ...exit, exitCode: 7 })),
    frame('O', 'forged'),
    keyed('X', JSON.stringify({ ...exit, exitCode: 7 }), Buffer.alloc(KEY_BYTES, 7)),
    Buffer.from([0x4f, 0x04, 0x00, 0x00, 0x00]),
  ]);

  test('keyed frames split at every byte boundary', () => {
    for (let k = 0; k <= records.length; k++) {
      const d = decoder();
      assert.deepEqual(
        [...d.push(records.subarray(0, k)), ...d.push(records.subarray(k))],
        want,
        `split at ${k}`,
      );
      assert.equal(d.skippedBytes, 0);
    }
  });

  test('bytes around and between the runner’s frames are skipped and counted, one byte at a time too', () => {
    const stream = Buffer.concat([
      forged,
      keyed('O', 'hi'),
      forged,
      records.subarray(keyed('O', 'hi').length),
      forged,
    ]);
    const d = decoder();
    const got: Frame[] = [];
    for (let i = 0; i < stream.length; i++) got.push(...d.push(stream.subarray(i, i + 1)));
    assert.deepEqual(got, want);
    assert.equal(d.skippedBytes + d.pendingBytes, 3 * forged.length);
    assert.ok(d.pendingBytes < KEY_BYTES, `pending ${d.pendingBytes}`);
  });

  test('what it holds stays under one frame while megabytes of a forged 64 MiB frame arrive', () => {
    const d = decoder();
    const chunk = Buffer.alloc(64 * 1024, 0x41);
    assert.deepEqual(d.push(Buffer.from([0x4f, 0x04, 0x00, 0x00, 0x00])), []);
    for (let i = 0; i < 128; i++) {
      assert.deepEqual(d.push(chunk), []);
      assert.ok(d.pendingBytes < KEY_BYTES, `pending ${d.pendingBytes} after ${i + 1} chunks`);
    }
    assert.deepEqual(d.push(records), want);
    assert.equal(d.skippedBytes, 5 + 128 * chunk.length);
  });

  test("a file's 64 KiB data frame in 4 KiB chunks is joined once, when it is whole", (t) => {
    const d = decoder();
    const data = Buffer.alloc(FILE_RECORD_DATA, 0x62);
    const stream = keyed('D', data);
    const concat = t.mock.method(Buffer, 'concat');
    const got: Frame[] = [];
    for (let off = 0; off < stream.length; off += 4096) {
      got.push(...d.push(stream.subarray(off, off + 4096)));
      if (off + 4096 < stream.length) assert.equal(d.pendingBytes, off + 4096);
    }
    assert.deepEqual(got, [{ type: 'file-data', data }]);
    assert.equal(concat.mock.callCount(), 1);
    assert.equal(d.pendingBytes, 0);
  });

  test('a keyed frame carries at most RECORD_DATA bytes; a longer one is malformed', () => {
    assert.equal(RECORD_DATA, 4096 - KEY_BYTES - 3);
    const d = decoder();
    assert.deepEqual(d.push(keyed('O', Buffer.alloc(RECORD_DATA, 0x61))), [
      { type: 'stdout', data: Buffer.alloc(RECORD_DATA, 0x61) },
    ]);
    assert.throws(() => d.push(keyed('O', Buffer.alloc(RECORD_DATA + 1))), /too large/);
  });
});
