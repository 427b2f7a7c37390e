import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PodChannel, type ChannelApi } from '../../../../../src/backends/kubernetes/sessions/pod-channel.js';
import { RunnerSession, type SessionHost } from '../../../../../src/backends/session-sandbox.js';
import type { SandboxEnd } from '../../../../../src/backends/sessions.js';
import type { SandboxStatus } from '../../../../../src/api/v1alpha1/sandbox.js';
import { evaluateSession } from '../../../../../src/policy/session.js';
import { createPolicy } from '../../../../../src/policy/policy.js';
import { SessionRequestSchema } from '../../../../../src/api/session.js';
import { SessionClient } from '../../../../../src/runner/session-client.js';

const REF = { namespace: 'ns', name: 'ses-1', uid: 'uid-1', podName: 'ses-1-pod' };

/** A pod attach that stays open, and a Sandbox whose status the test sets. */
function fakeKube(status: () => SandboxStatus | undefined) {
  const calls = { gets: 0, deletes: 0 };
  const kube = {
    attach: () =>
      Promise.resolve({
        write: () => Promise.resolve(),
        closed: new Promise<string>(() => {}),
        open: true,
        close: () => {},
      }),
    getObject: () => {
      calls.gets++;
      const s = status();
      return Promise.resolve(s ? { metadata: { name: REF.name, uid: REF.uid }, status: s } : undefined);
    },
    deleteObject: () => {
      calls.deletes++;
      return Promise.resolve();
    },
  } as unknown as ChannelApi;
  return { kube, calls };
}

const EXPIRED: SandboxStatus = {
  phase: 'Expired',
  reason: 'TTLExpired',
  message: 'the session reached its ttlSeconds (10s)',
};

describe("a session pod's end, as the Kubernetes backend classifies it", () => {
  test("the runner's own TTL, idle or close record is the end: the operator is not asked", async () => {
    const { kube, calls } = fakeKube(() => ({ phase: 'Ready' }));
    const channel = await PodChannel.attach(kube, REF, Buffer.alloc(16));
    const own: SandboxEnd = { reason: 'TTLExpired', message: 'the runner reached its TTL' };
    assert.deepEqual(await channel.endOf(own), own);
    assert.equal(calls.gets, 0);
  });

  test('a runner stopped from outside (the operator stopping the pod of a session it expired) ends as the operator recorded it', async () => {
    const { kube } = fakeKube(() => EXPIRED);
    const channel = await PodChannel.attach(kube, REF, Buffer.alloc(16));
    const end = await channel.endOf({ reason: 'ContainerFailed', message: 'the container was stopped' });
    assert.deepEqual(end, { reason: 'TTLExpired', message: EXPIRED.message });
  });

  test("no record from the runner: the operator's, once it has written one", async () => {
    let status: SandboxStatus = { phase: 'Ready' };
    const { kube, calls } = fakeKube(() => status);
    const channel = await PodChannel.attach(kube, REF, Buffer.alloc(16));
    setTimeout(() => (status = EXPIRED), 300);
    assert.equal((await channel.endOf(undefined)).reason, 'TTLExpired');
    assert.ok(calls.gets > 1, 'it waited for the record');
  });

  test('a Sandbox gone under a held session was deleted elsewhere (another replica recorded it): Deleted, not recorded again', async () => {
    const { kube } = fakeKube(() => undefined);
    const channel = await PodChannel.attach(kube, REF, Buffer.alloc(16));
    const end = await channel.endOf({ reason: 'ContainerFailed', message: 'the container was stopped' });
    assert.deepEqual([end.reason, end.recordedElsewhere], ['Deleted', true]);
  });

  test('an end by itself leaves the Sandbox (and its record) to the operator; a deletion deletes it', async () => {
    const { kube, calls } = fakeKube(() => EXPIRED);
    const ended = await PodChannel.attach(kube, REF, Buffer.alloc(16));
    await ended.retire();
    assert.equal(calls.deletes, 0);
    const deleted = await PodChannel.attach(kube, REF, Buffer.alloc(16));
    await deleted.remove();
    assert.equal(calls.deletes, 1);
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
