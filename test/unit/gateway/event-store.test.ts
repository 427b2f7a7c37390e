// The stateful session's SSE event store: replay after an id, the bounds (events, bytes), expiry
// after the deadline + grace, and ids it no longer holds refused rather than replayed with gaps.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import {
  approximateJsonBytes,
  BoundedEventStore,
  EVENT_STORE_LIMITS,
} from '../../../src/gateway/mcp/event-store.js';

const note = (n: number, text = ''): JSONRPCMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/message',
  params: { level: 'info', logger: 'stdout', data: `${n}${text}` },
});

async function replay(store: BoundedEventStore, after: string): Promise<[string, JSONRPCMessage][]> {
  const out: [string, JSONRPCMessage][] = [];
  await store.replayEventsAfter(after, { send: (id, m) => Promise.resolve(void out.push([id, m])) });
  return out;
}

const limits = { ...EVENT_STORE_LIMITS, deadlineMs: 30_000 };

test('replays what followed an id on its stream only, skipping the priming event', async () => {
  const store = new BoundedEventStore(limits);
  const priming = await store.storeEvent('s1', {} as JSONRPCMessage);
  const a = await store.storeEvent('s1', note(1));
  await store.storeEvent('s2', note(99));
  const b = await store.storeEvent('s1', note(2));
  assert.equal(await store.getStreamIdForEventId(a), 's1');
  assert.deepEqual(await replay(store, priming), [
    [a, note(1)],
    [b, note(2)],
  ]);
  assert.deepEqual(await replay(store, a), [[b, note(2)]]);
  assert.deepEqual(await replay(store, b), []);
  assert.equal(await store.getStreamIdForEventId('nonsense'), undefined);
  await assert.rejects(replay(store, 's9/0'), /unknown or expired/);
});

test('bounded to 1,000 events or 1 MiB per stream, newest kept; a resume past the dropped part is refused', async () => {
  const store = new BoundedEventStore(limits);
  const first = await store.storeEvent('s', note(0));
  for (let i = 1; i < 1500; i++) await store.storeEvent('s', note(i));
  assert.equal(store.size.events, 1000);
  await assert.rejects(replay(store, first), /dropped/);
  const big = new BoundedEventStore(limits);
  const kb = 'x'.repeat(100 * 1024);
  for (let i = 0; i < 20; i++) await big.storeEvent('s', note(i, kb));
  assert.ok(big.size.bytes <= 1024 * 1024, `${big.size.bytes} bytes`);
  assert.equal(big.size.events, 10);
  const huge = await big.storeEvent('s', note(99, 'y'.repeat(2 * 1024 * 1024)));
  assert.equal(big.size.events, 1, 'the newest event stays even when it alone is over the bound');
  assert.equal(await big.getStreamIdForEventId(huge), 's');
});

test('bounded to 4 MiB for the whole session: the oldest streams go first, whole; the current one stays', async () => {
  const store = new BoundedEventStore(limits);
  const mb = 'r'.repeat(1024 * 1024);
  const ids: string[] = [];
  // 150 calls whose results are 2 MiB each: before the session bound, all stayed for a minute.
  for (let i = 0; i < 150; i++) ids.push(await store.storeEvent(`call-${i}`, note(i, mb + mb)));
  assert.ok(store.size.bytes <= 4 * 1024 * 1024 + 64, `${store.size.bytes} bytes held`);
  assert.equal(await store.getStreamIdForEventId(ids[149]!), 'call-149');
  assert.equal(await store.getStreamIdForEventId(ids[0]!), undefined);
  const alone = new BoundedEventStore(limits);
  await alone.storeEvent('big', note(0, 'z'.repeat(6 * 1024 * 1024)));
  assert.equal(alone.size.events, 1, 'the newest event of the current stream stays, even over the bound');
});

test('a stream is kept until the deadline + 60 s, or 60 s after its last event, then forgotten', async () => {
  let now = 0;
  const store = new BoundedEventStore(limits, () => now);
  const id = await store.storeEvent('s', note(1));
  now = 30_000 + 59_000;
  assert.equal((await replay(store, id)).length, 0, 'still there');
  now = 30_000 + 61_000;
  await store.storeEvent('other', note(2));
  assert.equal(await store.getStreamIdForEventId(id), undefined);
  // A stream still sending stays: its last event counts.
  const live = await store.storeEvent('live', note(1));
  for (let i = 0; i < 5; i++) {
    now += 50_000;
    await store.storeEvent('live', note(i));
  }
  assert.equal(await store.getStreamIdForEventId(live), 'live');
});

test('an event is sized without writing it out: within a few bytes of its JSON when nothing needs escaping', () => {
  const image = Buffer.alloc(100_000, 7).toString('base64');
  const result: JSONRPCMessage = {
    jsonrpc: '2.0',
    id: 7,
    result: {
      content: [
        { type: 'text', text: 'ran é ✓' },
        { type: 'image', data: image, mimeType: 'image/png' },
      ],
      structuredContent: { exitCode: 0, timedOut: false, message: null, files: [] },
    },
  };
  for (const m of [result, note(1, 'plain text'), {} as JSONRPCMessage]) {
    const exact = Buffer.byteLength(JSON.stringify(m));
    const approx = approximateJsonBytes(m);
    assert.ok(approx >= exact && approx <= exact + 16, `${approx} for ${exact} bytes`);
  }
  // Escapes are not counted: a stored message is held as its strings, not as its JSON.
  const quoted = note(2, '"\n"'.repeat(100));
  assert.ok(approximateJsonBytes(quoted) < Buffer.byteLength(JSON.stringify(quoted)));
});
