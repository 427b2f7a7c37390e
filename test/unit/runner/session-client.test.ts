/**
 * A session runner's frames are untrusted input (an exec may even write into the runner's
 * stdout): records without the session's key are skipped, and a keyed message that is too long,
 * of an unknown type or against its schema ends that session with ProtocolError, failing what
 * was pending, and never throws into the caller.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SessionClient } from '../../../src/runner/session-client.js';
import { KEY_BYTES, newKey, REC_DATA, RETAINED_OUTPUT_BYTES } from '../../../src/runner/session-protocol.js';

function record(key: Buffer, type: string, id: number, data: Buffer | string, more = false): Buffer {
  const body = Buffer.from(data);
  const head = Buffer.alloc(KEY_BYTES + 8);
  key.copy(head);
  head.write(type, KEY_BYTES, 'latin1');
  head[KEY_BYTES + 1] = more ? 1 : 0;
  head.writeUInt32BE(id, KEY_BYTES + 2);
  head.writeUInt16BE(body.length, KEY_BYTES + 6);
  return Buffer.concat([head, body]);
}

function client(): { c: SessionClient; key: Buffer; sent: Buffer[] } {
  const key = newKey();
  const sent: Buffer[] = [];
  const c = new SessionClient(
    {
      write: (parts) => {
        sent.push(Buffer.concat(parts));
        return Promise.resolve();
      },
    },
    key,
  );
  return { c, key, sent };
}

const sink = { output: () => {}, tail: () => {} };
const exec = (c: SessionClient) =>
  c.exec(
    {
      name: 'e1',
      argv: ['true'],
      env: [],
      cwd: '',
      deadlineMs: 1000,
      window: { headBytes: 100, tailBytes: 100 },
      stdin: Buffer.alloc(0),
      streamStdin: false,
      background: false,
    },
    sink,
  );

describe('session client: untrusted runner frames', () => {
  test('records without the key are skipped and counted; the session goes on', () => {
    const { c, key } = client();
    const forged = record(Buffer.alloc(KEY_BYTES), 'Z', 0, '{"reason":"Closed"}');
    c.push(Buffer.concat([forged, Buffer.from('garbage written by a program')]));
    assert.equal(c.isEnded, false);
    assert.ok(c.skippedBytes >= forged.length);
    c.push(record(key, 'Z', 0, '{"reason":"TTLExpired"}'));
    assert.equal(c.isEnded, true, 'the keyed notice counts');
  });

  test('an exit report against its schema ends the session with ProtocolError and fails the exec', async () => {
    const { c, key } = client();
    const h = exec(c);
    c.push(record(key, 'X', 1, '{"exitCode":"zero"}'));
    assert.equal((await c.ended).reason, 'ProtocolError');
    await assert.rejects(h.exit);
  });

  test('a message longer than its type allows ends the session, however it is split', async () => {
    const { c, key } = client();
    const piece = 'x'.repeat(REC_DATA);
    for (let i = 0; i < 8 && !c.isEnded; i++) c.push(record(key, 'X', 1, piece, true));
    assert.equal((await c.ended).reason, 'ProtocolError');
  });

  test('a record of unknown type, or JSON that does not parse, ends the session', async () => {
    for (const [type, data] of [
      ['q', '{}'],
      ['Z', '{"reason":'],
    ] as const) {
      const { c, key } = client();
      c.push(record(key, type, 0, data));
      assert.equal((await c.ended).reason, 'ProtocolError', `${type} ${data}`);
    }
  });
});

/** The records (tag, text) of the body of the last request sent. */
function recordsOfLast(sent: Buffer[]): [string, string][] {
  const req = sent.at(-1)!;
  const body = req.subarray(9, 9 + req.readUInt32BE(5));
  const records: [string, string][] = [];
  for (let off = 0; off < body.length; off += 5 + body.readUInt32BE(off + 1)) {
    const data = body.subarray(off + 5, off + 5 + body.readUInt32BE(off + 1));
    records.push([String.fromCharCode(body[off]!), data.toString('latin1')]);
  }
  return records;
}

const OPEN = {
  ttlMs: 1000,
  idleMs: 1000,
  maxExecs: 1,
  env: [],
  workdir: '/workspace',
  meta: '',
  fileSizeBytes: 1,
  openFiles: 1,
};

describe('session client: the open', () => {
  test("names the variables of the runner's own environment each exec gets ('v', protocol 7), after the session's own", () => {
    const { c, sent } = client();
    c.open({ ...OPEN, env: [{ name: 'A', value: '1' }], inheritEnv: ['HTTPS_PROXY', 'NO_PROXY'] }).catch(
      () => {},
    );
    const records = recordsOfLast(sent).filter(([tag]) => tag === 'e' || tag === 'v');
    assert.deepEqual(records, [
      ['e', 'A=1'],
      ['v', 'HTTPS_PROXY'],
      ['v', 'NO_PROXY'],
    ]);
    c.open(OPEN).catch(() => {});
    assert.ok(!recordsOfLast(sent).some(([tag]) => tag === 'v'), 'none unless asked for');
    c.end({ reason: 'TransportClosed', message: 'done' });
  });
});

describe('session client: bulk reads', () => {
  const tagsOfLast = (sent: Buffer[]): string[] => recordsOfLast(sent).map(([tag]) => tag);

  for (const [version, bulk] of [
    [3, false],
    [4, true],
  ] as const) {
    test(`a read asks a protocol ${version} runner for bulk records: ${bulk}`, async () => {
      const { c, key, sent } = client();
      const opened = c.open(OPEN);
      c.push(record(key, 'A', 1, `{"version":${version}}`));
      assert.equal(await opened, version);
      void c.read('f', 10).catch(() => {});
      assert.equal(String.fromCharCode(sent.at(-1)![0]!), 'R');
      assert.equal(tagsOfLast(sent).includes('B'), bulk);
      c.end({ reason: 'TransportClosed', message: 'done' });
    });
  }
});

describe('session client: the exec history (protocol 5)', () => {
  const opened = async (version: number) => {
    const t = client();
    const open = t.c.open(OPEN);
    t.c.push(record(t.key, 'A', 1, `{"version":${version}}`));
    assert.equal(await open, version);
    return t;
  };
  const entry = (id: number, name: string) =>
    JSON.stringify({
      id,
      name,
      background: false,
      startedAgoMs: 900,
      finishedAgoMs: 800,
      deadlineMs: 20_000,
      window: [100, 100],
      argv: ['echo', name],
      report: {
        exitCode: 0,
        signal: 0,
        timedOut: false,
        oomKilled: false,
        killed: false,
        stdoutBytes: 6,
        stderrBytes: 0,
        durationMs: 100,
      },
    });
  const tail = (stream: 1 | 2, text: string) => Buffer.concat([Buffer.from([stream]), Buffer.from(text)]);

  test('each exec with the output that follows it, oldest first', async () => {
    const { c, key, sent } = await opened(5);
    const history = c.history();
    assert.equal(String.fromCharCode(sent.at(-1)![0]!), 'I');
    const id = sent.at(-1)!.readUInt32BE(1);
    c.push(
      Buffer.concat([
        record(key, 'h', id, entry(3, 'exec-one')),
        record(key, 'T', id, tail(1, 'one\n')),
        record(key, 'T', id, tail(2, 'warn\n')),
        record(key, 'h', id, entry(4, 'exec-two')),
        record(key, 'T', id, tail(1, 'tw')),
        record(key, 'T', id, tail(1, 'o\n')),
        record(key, 'A', id, '{"count":2}'),
      ]),
    );
    const got = await history;
    assert.deepEqual(
      got.map((e) => [e.name, e.stdout.toString(), e.stderr.toString()]),
      [
        ['exec-one', 'one\n', 'warn\n'],
        ['exec-two', 'two\n', ''],
      ],
    );
    assert.equal(c.isEnded, false);
  });

  test('a runner before protocol 5 keeps none: nothing is asked', async () => {
    const { c, sent } = await opened(4);
    const before = sent.length;
    assert.deepEqual(await c.history(), []);
    assert.equal(sent.length, before);
  });

  test('output before any exec, or past what the runner keeps, ends the session', async () => {
    for (const bad of ['orphan', 'too much'] as const) {
      const { c, key, sent } = await opened(5);
      const history = c.history();
      const id = sent.at(-1)!.readUInt32BE(1);
      if (bad === 'orphan') c.push(record(key, 'T', id, tail(1, 'x')));
      else {
        c.push(record(key, 'h', id, entry(3, 'exec-one')));
        const piece = tail(1, 'x'.repeat(REC_DATA - 1));
        for (let sentBytes = 0; sentBytes <= RETAINED_OUTPUT_BYTES && !c.isEnded; sentBytes += REC_DATA - 1)
          c.push(record(key, 'T', id, piece));
      }
      assert.equal((await c.ended).reason, 'ProtocolError', bad);
      await assert.rejects(history);
    }
  });
});
