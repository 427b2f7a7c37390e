import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeEvent, Pod } from '../../../../src/kube/objects.js';
import {
  awaitsSandbox,
  missingHandler,
  sandboxFailureSelector,
} from '../../../../src/controller/pod/runtime-handler.js';

function pod(
  over: { runtimeClassName?: string; nodeName?: string; phase?: string; waiting?: string } = {},
): Pod {
  const {
    runtimeClassName = 'fast',
    nodeName = 'node-1',
    phase = 'Pending',
    waiting = 'ContainerCreating',
  } = over;
  return {
    metadata: { name: 'run-abcde', namespace: 'ns', uid: 'u-1' },
    spec: {
      containers: [{ name: 'sandbox' }],
      ...(runtimeClassName ? { runtimeClassName } : {}),
      ...(nodeName ? { nodeName } : {}),
    },
    status: {
      phase,
      containerStatuses: [
        {
          name: 'sandbox',
          image: 'i',
          imageID: '',
          ready: false,
          restartCount: 0,
          state: { waiting: { reason: waiting } },
        },
      ],
    },
  };
}

const event = (message: string, reason = 'FailedCreatePodSandBox'): KubeEvent => ({
  metadata: {},
  involvedObject: { kind: 'Pod', uid: 'u-1' },
  reason,
  message,
});

// The kubelet's Event text, as each runtime words it.
const CONTAINERD =
  'Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "kata" is configured';
const DOCKERSHIM =
  'Failed to create pod sandbox: rpc error: code = Unknown desc = RuntimeHandler "kata" not supported';

describe('a RuntimeClass whose handler the node lacks', () => {
  test('only a scheduled, pending pod in a RuntimeClass with no container started is looked into', () => {
    assert.equal(awaitsSandbox(pod()), true);
    assert.equal(awaitsSandbox(pod({ runtimeClassName: '' })), false, 'no RuntimeClass');
    assert.equal(awaitsSandbox(pod({ nodeName: '' })), false, 'not scheduled yet');
    assert.equal(awaitsSandbox(pod({ phase: 'Running' })), false);
    assert.equal(awaitsSandbox(pod({ waiting: 'ErrImageNeverPull' })), false, 'the sandbox exists');
  });

  test('the Events are selected by the pod uid and the kubelet reason', () => {
    assert.equal(sandboxFailureSelector(pod()), 'involvedObject.uid=u-1,reason=FailedCreatePodSandBox');
  });

  for (const [runtime, message] of [
    ['containerd', CONTAINERD],
    ['dockershim', DOCKERSHIM],
  ] as const) {
    test(`${runtime}: RuntimeClassNotFound naming the handler, the class and the node; not permanent`, () => {
      const b = missingHandler(pod(), [event(message)]);
      assert.equal(b?.reason, 'RuntimeClassNotFound');
      assert.equal(b?.permanent, false);
      assert.match(b?.message ?? '', /^node node-1 has no runtime handler "kata" for RuntimeClass "fast" \(/);
    });
  }

  test('other sandbox failures and other reasons are not a missing handler', () => {
    assert.equal(missingHandler(pod(), []), undefined);
    assert.equal(missingHandler(pod(), [event('Failed to create pod sandbox: some CNI error')]), undefined);
    assert.equal(missingHandler(pod(), [event(CONTAINERD, 'Scheduled')]), undefined);
  });
});
