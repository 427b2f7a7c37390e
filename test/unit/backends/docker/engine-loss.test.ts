/**
 * What an engine that went away means to the Docker backend: a session container stopped or lost
 * while the engine does not answer ended with the engine (EngineRestarted); any other end stands,
 * and the engine is asked only when it matters. After the engine is back, only containers made
 * before it went away are the backend's to clear.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SandboxEnd } from '../../../../src/backends/sessions.js';
import { madeBefore } from '../../../../src/backends/docker/reaper.js';
import { weighEngine } from '../../../../src/backends/docker/session/session-container.js';

const asked = (answers: boolean) => {
  const probe = { calls: 0, answers: () => (probe.calls++, Promise.resolve(answers)) };
  return probe;
};

test('a session stopped from outside or lost while the engine is silent ended with the engine', async () => {
  for (const reason of ['ContainerFailed', 'RunnerGone'] as const) {
    const end = await weighEngine({ reason, message: 'stopped' }, asked(false).answers);
    assert.equal(end.reason, 'EngineRestarted');
    assert.match(end.message, /engine stopped or restarted.*live-restore is off/);
  }
});

test('the same end while the engine answers is what it says (docker stop, docker kill)', async () => {
  const end: SandboxEnd = { reason: 'ContainerFailed', message: 'the container was stopped from outside' };
  assert.deepEqual(await weighEngine(end, asked(true).answers), end);
});

test('the ends an engine does not cause stand, and the engine is not asked', async () => {
  for (const reason of ['TTLExpired', 'IdleExpired', 'Deleted', 'OOMKilled', 'ProtocolError'] as const) {
    const probe = asked(false);
    const end: SandboxEnd = { reason, message: reason };
    assert.deepEqual(await weighEngine(end, probe.answers), end);
    assert.equal(probe.calls, 0, reason);
  }
});

test('a container made before the engine went away is to clear; one made after it came back is not', () => {
  const lostAt = Date.parse('2026-12-03T14:14:10.000Z');
  assert.equal(madeBefore('2026-12-03T14:14:09.927123456Z', lostAt), true);
  assert.equal(madeBefore('2026-12-03T14:14:10.000000001Z', lostAt), false, 'in the same second, after');
  assert.equal(madeBefore('2026-12-03T14:14:12.5Z', lostAt), false);
  assert.equal(madeBefore('not a time', lostAt), false, 'never on a time it cannot read');
});
