// The hardened pod skeleton on its own, as another kind's program would use it (the run's pod is
// tested field by field in sandboxrun/build-run-pod.test.ts).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildSandboxPod } from '../../../../src/controller/pod/build-sandbox-pod.js';
import { effective, SETTINGS } from '../fixtures.js';

const spec = effective();
const meta = { name: 's-1', namespace: 'agents' };

describe('buildSandboxPod', () => {
  test('the program is what the caller gives; the hardening is not', () => {
    const pod = buildSandboxPod({ meta, spec, settings: SETTINGS, program: { command: ['sleep', '1'] } });
    const c = pod.spec!.containers[0]!;
    assert.equal(pod.spec?.containers.length, 1);
    assert.equal(c.name, 'sandbox');
    assert.deepEqual(c.command, ['sleep', '1']);
    assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
    assert.deepEqual(c.securityContext?.capabilities, { drop: ['ALL'] });
    assert.equal(pod.spec?.automountServiceAccountToken, false);
    assert.equal(pod.spec?.enableServiceLinks, false);
    assert.equal(pod.spec?.dnsPolicy, 'None');
    assert.deepEqual(
      c.volumeMounts?.map((m) => m.name),
      ['workspace', 'tmp'],
    );
    assert.equal(pod.spec?.activeDeadlineSeconds, undefined, 'no deadline unless the caller sets one');
  });

  test('inputs are always mounted read-only', () => {
    const pod = buildSandboxPod({
      meta,
      spec,
      settings: SETTINGS,
      program: {
        command: ['true'],
        inputs: [
          {
            mount: { name: 'in', mountPath: '/in', readOnly: false },
            volume: { name: 'in', configMap: { name: 'cm' } },
          },
        ],
      },
      activeDeadlineSeconds: 9,
    });
    const mount = pod.spec!.containers[0]!.volumeMounts!.find((m) => m.name === 'in');
    assert.equal(mount?.readOnly, true);
    assert.ok(pod.spec?.volumes?.some((v) => v.name === 'in' && v.configMap?.name === 'cm'));
    assert.equal(pod.spec?.activeDeadlineSeconds, 9);
  });
});
