import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createEventRecorder } from '../../../src/controller/events.js';
import type { ObjectRef } from '../../../src/controller/children.js';
import type { KubeClient } from '../../../src/kube/client.js';
import type { KubeEvent } from '../../../src/kube/objects.js';
import type { Logger } from '../../../src/observability/logger.js';

const RUN: ObjectRef = {
  apiVersion: 'sandpit.dev/v1alpha1',
  kind: 'SandboxRun',
  namespace: 'agents',
  name: 'hello',
  uid: 'u-1',
};

const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Written {
  reason: string;
  at: number;
}

/** A recorder over a fake apiserver: what it wrote (reason and when), and what it logged. */
function harness(fail: (e: KubeEvent) => boolean = () => false) {
  const written: Written[] = [];
  const dropped: Record<string, unknown>[] = [];
  let hold: Promise<void> | undefined;
  const kube = {
    createEvent: async (_ns: string, e: KubeEvent): Promise<KubeEvent> => {
      await hold;
      if (fail(e)) throw new Error('the apiserver said no');
      written.push({ reason: e.reason ?? '', at: performance.now() });
      return e;
    },
  } as unknown as KubeClient;
  const logger = { warn: (o: Record<string, unknown>) => void dropped.push(o) } as unknown as Logger;
  const events = createEventRecorder({ kube, logger, instance: 'op-1', now: () => new Date() });
  return {
    events,
    written,
    dropped,
    holdWrites: (p: Promise<void>): void => {
      hold = p;
    },
  };
}

describe('the event recorder', () => {
  test('recording never waits: the writes come later, in order, each 100 ms or more after it was recorded', async () => {
    const h = harness();
    const recordedAt = performance.now();
    assert.equal(h.events.normal(RUN, 'ClaimedPod', 'Claimed pod p-1'), undefined);
    h.events.normal(RUN, 'Started', 'the program is running');
    h.events.warning(RUN, 'Failed', 'Error: exit 3');
    await tick(50);
    assert.equal(h.written.length, 0, 'nothing is written before its time');
    await tick(250);
    assert.deepEqual(
      h.written.map((w) => w.reason),
      ['ClaimedPod', 'Started', 'Failed'],
    );
    for (const w of h.written) assert.ok(w.at - recordedAt >= 99, `written ${w.at - recordedAt} ms after`);
  });

  test('an Event the apiserver refuses is logged and dropped; the next one is still written', async () => {
    const h = harness((e) => e.reason === 'ClaimedPod');
    h.events.normal(RUN, 'ClaimedPod', 'Claimed pod p-1');
    h.events.normal(RUN, 'Started', 'the program is running');
    await h.events.flush();
    assert.deepEqual(
      h.written.map((w) => w.reason),
      ['Started'],
    );
    assert.equal(h.dropped.length, 1);
    assert.equal(h.dropped[0]!.reason, 'ClaimedPod');
    assert.equal(h.dropped[0]!.object, 'SandboxRun agents/hello');
  });

  test('flush() writes what waits at once', async () => {
    const h = harness();
    const t0 = performance.now();
    h.events.normal(RUN, 'Succeeded', 'exit 0');
    await h.events.flush();
    assert.equal(h.written.length, 1);
    assert.ok(h.written[0]!.at - t0 < 90, 'not after the usual wait');
  });

  test('past 1000 waiting, a new Event is dropped and logged, not queued', async () => {
    const h = harness();
    let release!: () => void;
    h.holdWrites(new Promise<void>((r) => (release = r)));
    for (let i = 0; i <= 1000; i++) h.events.normal(RUN, `E${i}`, 'm');
    assert.equal(h.dropped.length, 1);
    assert.equal(h.dropped[0]!.reason, 'E1000');
    assert.match(String(h.dropped[0]!.err), /1000 Events wait/);
    release();
    await h.events.flush();
    assert.equal(h.written.length, 1000);
    assert.equal(h.written[999]!.reason, 'E999');
  });
});
