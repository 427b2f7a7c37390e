import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SessionChannel } from '../../../src/backends/session-channel.js';
import { KEY_BYTES, MIN_SESSION_PROTOCOL_VERSION } from '../../../src/runner/session-protocol.js';

const key = Buffer.alloc(KEY_BYTES, 7);

function readyFrame(version: number): Buffer {
  const b = Buffer.alloc(9);
  b[0] = 0x52;
  b.writeUInt32BE(4, 1);
  b.writeUInt32BE(version, 5);
  return b;
}

test('a ready frame split across chunks: the runner is ready', async () => {
  const channel = new SessionChannel(key);
  const frame = readyFrame(MIN_SESSION_PROTOCOL_VERSION);
  channel.push(frame.subarray(0, 4));
  channel.push(Buffer.concat([frame.subarray(4), Buffer.from('\n')]));
  assert.equal(await channel.ready('img', () => ''), true);
});

test('an older protocol, or no ready frame at all, is an outdated image', async () => {
  const old = new SessionChannel(key);
  old.push(readyFrame(MIN_SESSION_PROTOCOL_VERSION - 1));
  await assert.rejects(
    old.ready('img', () => ''),
    { code: 'IMAGE_OUTDATED', message: /session protocol/ },
  );
  const other = new SessionChannel(key);
  other.push(Buffer.from('something else'));
  await assert.rejects(
    other.ready('img', () => ''),
    { code: 'IMAGE_OUTDATED' },
  );
});

test('a sandbox that stops first: not ready, or outdated when its runner printed its usage', async () => {
  const stopped = new SessionChannel(key);
  stopped.stopped();
  assert.equal(await stopped.ready('img', () => 'oops'), false);
  const usage = new SessionChannel(key);
  usage.stopped();
  await assert.rejects(
    usage.ready('img', () => 'usage: sandpit-runner [--job FILE]'),
    {
      code: 'IMAGE_OUTDATED',
      message: /has no session mode/,
    },
  );
});

test('an adopted runner is ready at once (no frame comes)', async () => {
  const channel = new SessionChannel(key);
  channel.adopted();
  assert.equal(await channel.ready('img', () => ''), true);
});
