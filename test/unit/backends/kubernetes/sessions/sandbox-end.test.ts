import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  podEnd,
  recordedEnd,
  runnerEndStands,
} from '../../../../../src/backends/kubernetes/sessions/sandbox-end.js';
import type { SandboxObject } from '../../../../../src/backends/kubernetes/sessions/sandbox-checks.js';
import { RunnerSession, type SessionHost } from '../../../../../src/backends/session-sandbox.js';
import type { SandboxEnd } from '../../../../../src/backends/sessions.js';
import type { SandboxStatus } from '../../../../../src/api/v1alpha1/sandbox.js';
import { evaluateSession } from '../../../../../src/policy/session.js';
import { createPolicy } from '../../../../../src/policy/policy.js';
import { SessionRequestSchema } from '../../../../../src/api/session.js';
import { SessionClient } from '../../../../../src/runner/session-client.js';

const REF = { namespace: 'ns', name: 'ses-1' };
const POD = 'ses-1-pod';
const sandboxWith = (status: SandboxStatus): SandboxObject => ({ metadata: { name: REF.name }, status });

const EXPIRED: SandboxStatus = {
  phase: 'Expired',
  reason: 'TTLExpired',
  message: 'the session reached its ttlSeconds (10s)',
};

// How a session pod's end is classified, from the runner's record and the Sandbox's. The reading of
// the objects is tested on the real cluster: the contract's TTL and idle case (the operator's
// record kept, TTLExpired and IdleExpired) and gateway-sessions-service (deleted on another replica).
describe("a session pod's end, as the Kubernetes backend classifies it", () => {
  test("the runner's own TTL, idle or close record is the end: the operator's is not needed", () => {
    for (const reason of ['TTLExpired', 'IdleExpired', 'Deleted'] as const)
      assert.equal(runnerEndStands({ reason, message: 'the runner says' }), true, reason);
  });

  test('a runner stopped from outside (the operator stopping the pod of a session it expired) ends as the operator recorded it', () => {
    const own: SandboxEnd = { reason: 'ContainerFailed', message: 'the container was stopped' };
    assert.equal(runnerEndStands(own), false);
    const recorded = recordedEnd(sandboxWith(EXPIRED), REF);
    assert.deepEqual(podEnd(own, recorded, POD), { reason: 'TTLExpired', message: EXPIRED.message });
  });

  test("no record from the runner: the operator's once it has one; until then none, and RunnerGone at last", () => {
    assert.equal(runnerEndStands(undefined), false);
    assert.equal(recordedEnd(sandboxWith({ phase: 'Ready' }), REF), undefined);
    assert.equal(recordedEnd(sandboxWith({ phase: 'Creating' }), REF), undefined);
    assert.equal(podEnd(undefined, recordedEnd(sandboxWith(EXPIRED), REF), POD).reason, 'TTLExpired');
    const none = podEnd(undefined, undefined, POD);
    assert.equal(none.reason, 'RunnerGone');
    assert.match(none.message, /ses-1-pod/);
  });

  test('a Sandbox gone under a held session was deleted elsewhere (another replica recorded it): Deleted, not recorded again', () => {
    const own: SandboxEnd = { reason: 'ContainerFailed', message: 'the container was stopped' };
    const end = podEnd(own, recordedEnd(undefined, REF), POD);
    assert.deepEqual([end.reason, end.recordedElsewhere], ['Deleted', true]);
    assert.match(end.message, /ns\/ses-1 is gone/);
  });
});

describe('a runner session that ended by itself', () => {
  test("asks its host how it ended, with the runner's own record, then retires the sandbox (never removes it)", async () => {
    const client = new SessionClient({ write: () => Promise.resolve() }, Buffer.alloc(16));
    const seen: { own?: SandboxEnd | undefined; retired: number; removed: number } = {
      retired: 0,
      removed: 0,
    };
    const host: SessionHost = {
      gone: new Promise(() => {}),
      endOf: (own) => {
        seen.own = own;
        return Promise.resolve({ reason: 'TTLExpired', message: 'the operator says so' });
      },
      remove: () => Promise.resolve(void seen.removed++),
      retire: () => Promise.resolve(void seen.retired++),
      detach: () => {},
    };
    const evaluated = evaluateSession(SessionRequestSchema.parse({ template: 'python' }), createPolicy());
    assert.ok(evaluated.ok);
    const session = new RunnerSession({ sessionId: 'ses-1', client, host, spec: evaluated.spec });
    client.transportClosed('the attach closed');
    assert.deepEqual(await session.ended, { reason: 'TTLExpired', message: 'the operator says so' });
    assert.equal(seen.own, undefined, 'the runner sent no record of its end');
    assert.deepEqual([seen.retired, seen.removed], [1, 0]);
  });
});
