import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ANNOTATION_CLAIMED_AT,
  LABEL_POOL,
  LABEL_POOL_POD,
  LABEL_POOL_SHAPE,
  LABEL_POOL_UID,
  LABEL_RUN,
  LABEL_RUN_UID,
} from '../../../../src/api/v1alpha1/labels.js';
import {
  buildClaim,
  claimCandidates,
  claimedPods,
  isClaimedBy,
  isIdlePoolPod,
  poolOfPod,
} from '../../../../src/controller/pod/claim-pool-pod.js';
import { poolShapeLabel } from '../../../../src/controller/sandboxpool/evaluate-pool.js';
import { runPodLabels } from '../../../../src/controller/sandboxrun/run-ref.js';
import type { EffectiveSpec } from '../../../../src/policy/evaluate.js';
import { withoutTrailer } from '../../../../src/controller/sandboxrun/read-output.js';
import type { Pod } from '../../../../src/kube/objects.js';
import { encodeTrailer } from '../../../../src/runner/exit-trailer.js';
import { newChannelKey } from '../../../../src/runner/protocol.js';
import { effective, poolPod as poolPodOf, RUN } from '../fixtures.js';

const runShapeLabel = (e: EffectiveSpec): string => poolShapeLabel(e, 'run');
const claimFor = (pod: Pod, now: Date): Pod =>
  buildClaim({ pod, owner: RUN, ownerLabels: runPodLabels(RUN), remainingSeconds: 20 + 15, now });

const spec = effective({ template: 'python', code: 'print(1)', timeoutSeconds: 20 });
const SHAPE = runShapeLabel(spec);
const poolPod = (name: string, over: Parameters<typeof poolPodOf>[2] = {}): Pod =>
  poolPodOf(name, SHAPE, over);

describe('claimCandidates: the idle, ready pool pods of the run’s shape', () => {
  test('only idle pods of the shape, ready, not ending, that a SandboxPool controls; oldest first', () => {
    const pods = [
      poolPod('newer', { created: '2026-01-01T00:00:05Z' }),
      poolPod('older'),
      poolPod('other-shape', { labels: { [LABEL_POOL_SHAPE]: 'x'.repeat(32) } }),
      poolPod('claimed', { labels: { [LABEL_POOL_POD]: 'claimed' } }),
      poolPod('starting', { ready: false }),
      poolPod('ending', { deleting: true }),
      poolPod('orphan', { owner: 'none' }),
    ];
    assert.deepEqual(
      claimCandidates(pods, SHAPE).map((p) => p.metadata?.name),
      ['older', 'newer'],
    );
    assert.equal(isIdlePoolPod(poolPod('orphan', { owner: 'none' })), false);
    assert.equal(poolOfPod(pods[0]!), 'py');
  });

  test('a run of other limits has another shape: no best fit', () => {
    const bigger = effective({ template: 'python', code: 'print(1)', resources: { memory: '96Mi' } });
    assert.notEqual(runShapeLabel(bigger), SHAPE);
    // The job itself (code, timeout) is not part of the shape.
    assert.equal(
      runShapeLabel(effective({ template: 'python', code: 'print(2)', timeoutSeconds: 5 })),
      SHAPE,
    );
  });
});

describe('buildClaim: one update binds the pod to the run', () => {
  const now = new Date('2026-01-01T00:00:30Z');
  const claim = claimFor(poolPod('p'), now);

  test('claimed, with the run’s labels; the pool labels stay', () => {
    const labels = claim.metadata?.labels ?? {};
    assert.equal(labels[LABEL_POOL_POD], 'claimed');
    assert.equal(labels[LABEL_RUN_UID], RUN.uid);
    assert.equal(labels[LABEL_RUN], RUN.name);
    assert.equal(labels[LABEL_POOL], 'py');
    assert.equal(labels[LABEL_POOL_UID], 'pool-uid');
    assert.equal(labels[LABEL_POOL_SHAPE], SHAPE);
  });

  test("stamped with the claim's time (its pool's refill waits on it)", () => {
    assert.equal(claim.metadata?.annotations?.[ANNOTATION_CLAIMED_AT], now.toISOString());
  });

  test('the run is its only owner, and the resourceVersion guards the write', () => {
    assert.deepEqual(claim.metadata?.ownerReferences, [
      { apiVersion: RUN.apiVersion, kind: RUN.kind, name: RUN.name, uid: RUN.uid, controller: true },
    ]);
    assert.equal(claim.metadata?.resourceVersion, '7');
    assert.ok(isClaimedBy(claim, RUN));
    assert.deepEqual(claimedPods([claim, poolPod('q')], RUN), [claim]);
    assert.equal(isClaimedBy(claim, { uid: 'another' }), false);
  });

  test('the deadline counts from the claim: the pod’s age plus the timeout and the start grace, never raised', () => {
    assert.equal(claim.spec?.activeDeadlineSeconds, 30 + 20 + 15);
    const young = { ...poolPod('y'), spec: { ...poolPod('y').spec!, activeDeadlineSeconds: 40 } };
    const c = claimFor(young, now);
    assert.equal(c.spec?.activeDeadlineSeconds, 40);
  });
});

test('withoutTrailer: a pool pod’s log without the runner’s exit trailer', () => {
  const trailer = encodeTrailer(newChannelKey(), {
    kind: 'exit',
    report: {
      exitCode: 0,
      signal: 0,
      timedOut: false,
      oomKilled: false,
      stdoutBytes: 3,
      stderrBytes: 0,
      durationMs: 5,
    },
  }).toString();
  assert.equal(withoutTrailer(`hi\n${trailer}`), 'hi\n');
  assert.equal(withoutTrailer('no trailer\n'), 'no trailer\n');
});
