import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { RunRequestSchema } from '../../../../src/api/run.js';
import { ConditionType, setCondition } from '../../../../src/api/v1alpha1/conditions.js';
import { childName, labelValueFor } from '../../../../src/api/v1alpha1/labels.js';
import {
  SandboxRunSchema,
  SandboxRunSpecSchema,
  toRunRequestInput,
} from '../../../../src/api/v1alpha1/sandboxrun.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

describe('SandboxRun schema', () => {
  test('deploy/samples/python-hello.yaml is a valid SandboxRun', () => {
    const doc = parse(readFileSync(path.join(ROOT, 'deploy/samples/python-hello.yaml'), 'utf8')) as Record<
      string,
      unknown
    >;
    const run = SandboxRunSchema.parse(doc);
    assert.equal(run.spec.template, 'python');
    assert.match(run.spec.code ?? '', /print/);
  });

  test('the spec is the run request with runtime spelled runtimeClassName and no requestId (the run is its own key), plus lifecycle fields', () => {
    const request = Object.keys(RunRequestSchema.shape).filter((k) => k !== 'runtime' && k !== 'requestId');
    assert.deepEqual(
      Object.keys(SandboxRunSpecSchema.shape).sort(),
      [...request, 'runtimeClassName', 'ttlSecondsAfterFinished', 'pendingTimeoutSeconds', 'cancel'].sort(),
    );
  });

  test('toRunRequestInput renames runtimeClassName and drops the lifecycle fields', () => {
    const spec = SandboxRunSpecSchema.parse({
      template: 'python',
      code: 'print(1)',
      runtimeClassName: 'gvisor',
      ttlSecondsAfterFinished: 5,
      pendingTimeoutSeconds: 9,
      cancel: false,
    });
    const req = RunRequestSchema.parse(toRunRequestInput(spec));
    assert.equal(req.runtime, 'gvisor');
    assert.ok(!('runtimeClassName' in req));
    assert.ok(!('cancel' in req) && !('ttlSecondsAfterFinished' in req) && !('pendingTimeoutSeconds' in req));
  });

  test('rejects negative TTLs and zero pending timeouts', () => {
    assert.equal(SandboxRunSpecSchema.safeParse({ ttlSecondsAfterFinished: -1 }).success, false);
    assert.equal(SandboxRunSpecSchema.safeParse({ pendingTimeoutSeconds: 0 }).success, false);
  });
});

describe('conditions', () => {
  const c0 = {
    type: ConditionType.Started,
    status: 'False' as const,
    reason: 'PodPending',
    message: 'm',
    observedGeneration: 1,
  };

  test('a new condition gets now as its transition time', () => {
    assert.deepEqual(setCondition([], c0, 'T1'), [{ ...c0, lastTransitionTime: 'T1' }]);
  });

  test('the same status keeps the transition time, even when reason and message change', () => {
    const once = setCondition([], c0, 'T1');
    const twice = setCondition(
      once,
      { ...c0, reason: 'ContainerCreating', message: 'x', observedGeneration: 2 },
      'T2',
    );
    assert.equal(twice[0]!.lastTransitionTime, 'T1');
    assert.equal(twice[0]!.reason, 'ContainerCreating');
    assert.equal(twice[0]!.observedGeneration, 2);
  });

  test('a status change moves the transition time; other conditions keep their order', () => {
    const a = setCondition(setCondition([], { ...c0, type: 'Admitted', status: 'True' }, 'T0'), c0, 'T1');
    const b = setCondition(a, { ...c0, status: 'True', reason: 'ContainerStarted' }, 'T2');
    assert.deepEqual(
      b.map((c) => [c.type, c.lastTransitionTime]),
      [
        ['Admitted', 'T0'],
        ['Started', 'T2'],
      ],
    );
  });
});

describe('names and labels', () => {
  test('child names are deterministic, at most 63 characters, and differ per UID', () => {
    const a = childName('hello', 'uid-1');
    assert.equal(a, childName('hello', 'uid-1'));
    assert.notEqual(a, childName('hello', 'uid-2'));
    assert.match(a, /^hello-[0-9a-f]{5}$/);
    const long = childName(`${'x'.repeat(70)}.y`, 'u');
    assert.ok(long.length <= 63);
    assert.match(childName(`${'a'.repeat(56)}--b`, 'u'), /^a{56}-[0-9a-f]{5}$/);
  });

  test('label values: the name when it fits, a hash when it does not', () => {
    assert.equal(labelValueFor('python-hello'), 'python-hello');
    assert.match(labelValueFor('x'.repeat(64)), /^h-[0-9a-f]{20}$/);
    assert.match(labelValueFor('a.b-'), /^h-/);
  });
});
