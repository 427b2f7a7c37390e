import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sessionEnd } from '../../../src/runner/session-end.js';
import { RUNNER_EXIT } from '../../../src/runner/session-protocol.js';

test('a stopped session container says why by its exit status, OOM first', () => {
  const reason = (exitCode: number, oomKilled = false) => sessionEnd({ exitCode, oomKilled })?.reason;
  assert.equal(reason(137, true), 'OOMKilled', 'the OOM killer sends SIGKILL too');
  assert.equal(reason(RUNNER_EXIT.ttl), 'TTLExpired');
  assert.equal(reason(RUNNER_EXIT.idle), 'IdleExpired');
  assert.equal(reason(RUNNER_EXIT.closed), 'Deleted');
  assert.equal(reason(RUNNER_EXIT.stopped), 'ContainerFailed', 'docker stop: the runner took SIGTERM');
  assert.equal(reason(137), 'ContainerFailed', 'docker kill: SIGKILL from outside');
  assert.equal(reason(RUNNER_EXIT.failed), 'RunnerGone');
  assert.equal(reason(139), 'RunnerGone', 'the runner crashed');
  assert.equal(reason(RUNNER_EXIT.neverOpened), undefined, 'a pool container nobody claimed');
});
