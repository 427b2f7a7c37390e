/**
 * The engine watch: the end of the engine's event stream counts as the engine going away only when
 * the engine does not answer either; once it answers again, the backend is told since when it was
 * away, and the stream is followed again.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type Docker from 'dockerode';
import { EngineWatch } from '../../../../src/backends/docker/engine-watch.js';

/** An engine over TCP as far as the probe knows (no socket path): asked with ping(). */
function fakeEngine() {
  const engine = {
    up: true,
    streams: [] as PassThrough[],
    docker: undefined as unknown as Docker,
  };
  engine.docker = {
    modem: {},
    ping: () => (engine.up ? Promise.resolve('OK') : Promise.reject(new Error('ECONNREFUSED'))),
    getEvents: () => {
      if (!engine.up) return Promise.reject(new Error('ECONNREFUSED'));
      const stream = new PassThrough();
      engine.streams.push(stream);
      return Promise.resolve(stream);
    },
  } as unknown as Docker;
  return engine;
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('an engine that went away and came back is reported once, with when it went', async () => {
  const engine = fakeEngine();
  const backs: number[] = [];
  const watch = new EngineWatch({ docker: engine.docker, onBack: (lostAt) => backs.push(lostAt) });
  watch.start();
  try {
    await tick(20);
    assert.equal(engine.streams.length, 1, 'the event stream is followed');
    const before = Date.now();
    engine.up = false;
    engine.streams[0]!.end();
    await tick(600);
    assert.deepEqual(backs, [], 'not back while it does not answer');
    engine.up = true;
    await tick(1200);
    assert.equal(backs.length, 1);
    assert.ok(backs[0]! >= before && backs[0]! <= Date.now(), 'away since the stream ended');
    assert.equal(engine.streams.length, 2, 'the event stream is followed again');
  } finally {
    watch.stop();
  }
});

test('a stream that ends while the engine answers is followed again, and is no absence', async () => {
  const engine = fakeEngine();
  const backs: number[] = [];
  const watch = new EngineWatch({ docker: engine.docker, onBack: (lostAt) => backs.push(lostAt) });
  watch.start();
  try {
    await tick(20);
    engine.streams[0]!.end();
    await tick(2300);
    assert.deepEqual(backs, []);
    assert.equal(engine.streams.length, 2);
  } finally {
    watch.stop();
  }
});

test('stop() ends the stream and every retry', async () => {
  const engine = fakeEngine();
  const watch = new EngineWatch({
    docker: engine.docker,
    onBack: () => assert.fail('no engine to come back'),
  });
  watch.start();
  await tick(20);
  const stream = engine.streams[0]!;
  const closed = once(stream, 'close');
  watch.stop();
  await closed;
  engine.up = false;
  await tick(300);
  assert.equal(engine.streams.length, 1);
});
