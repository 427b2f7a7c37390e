// The pure half of the Kubernetes run store: a SandboxRun as the RunResult another gateway replica
// answers get_run with, and what ran (the policy's decision on the recorded spec).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RunRequestSchema, RunResultSchema } from '../../../../src/api/run.js';
import type { SandboxRun } from '../../../../src/api/v1alpha1/sandboxrun.js';
import {
  buildSandboxRun,
  LABEL_TASK_OF,
  principalLabelValue,
} from '../../../../src/backends/kubernetes/build-sandbox-run.js';
import type { RunApi } from '../../../../src/backends/kubernetes/run-api.js';
import { createRunRecords, subjectOf } from '../../../../src/backends/kubernetes/run-records.js';
import { resultFromRecord } from '../../../../src/backends/kubernetes/run-result.js';
import { evaluate } from '../../../../src/policy/evaluate.js';
import { createPolicy } from '../../../../src/policy/policy.js';

const policy = createPolicy({ imageAllowlist: ['sandpit/*'], ceilings: { outputBytes: 65_536 } });
const e = evaluate(
  RunRequestSchema.parse({ template: 'python', code: 'print(1)', resources: { memory: '128Mi' } }),
  policy,
);
assert.ok(e.ok);
const spec = e.spec;

function recorded(status: SandboxRun['status']): SandboxRun {
  const run = buildSandboxRun(spec, {
    runId: 'run-0123456789ab',
    namespace: 'team-a',
    principal: 'a',
    owner: 'token:aaaa',
    ttlSecondsAfterFinished: 600,
    pendingTimeoutSeconds: 60,
  });
  return {
    ...run,
    metadata: { ...run.metadata, creationTimestamp: '2026-01-01T00:00:00Z', resourceVersion: '7' },
    ...(status ? { status } : {}),
  };
}

describe('subjectOf: what ran, as the gateway decided it', () => {
  test('the same policy reaches the same decision on the recorded spec', () => {
    assert.deepEqual(subjectOf(recorded(undefined), policy), spec);
  });

  test('a spec the policy no longer allows: its image and template, the ceilings as limits', () => {
    const s = subjectOf(recorded(undefined), createPolicy({ imageAllowlist: ['other/*'] }));
    assert.equal(s.image, 'sandpit/python:3.11');
    assert.equal(s.template, 'python');
    assert.equal(s.limits.memoryBytes, 512 * 1024 ** 2);
  });
});

describe('resultFromRecord: a SandboxRun as get_run answers it on any replica', () => {
  const now = Date.parse('2026-01-01T00:00:05Z');

  test('no status yet: Pending, no exit code, the duration so far', () => {
    const r = resultFromRecord(recorded(undefined), spec, now);
    RunResultSchema.parse(r);
    assert.equal(r.runId, 'run-0123456789ab');
    assert.equal(r.phase, 'Pending');
    assert.equal(r.exitCode, null);
    assert.equal(r.durationMs, 5000);
    assert.equal(r.finishedAt, undefined);
    assert.equal(r.backend, 'kubernetes');
    assert.equal(r.limits?.outputBytes, 65_536);
  });

  test('running: the phase, without output (the pod log is the live output of the replica that follows it)', () => {
    const r = resultFromRecord(recorded({ phase: 'Running', podName: 'p' }), spec, now);
    assert.equal(r.phase, 'Running');
    assert.equal(r.stdout, '');
  });

  test("finished: the operator's outcome and the status's output tail, timed by completionTime", () => {
    const r = resultFromRecord(
      recorded({
        phase: 'Failed',
        reason: 'Error',
        exitCode: 3,
        completionTime: '2026-01-01T00:00:02Z',
        output: { tail: 'boom\n', truncated: false, bytes: 5 },
      }),
      spec,
      now,
    );
    RunResultSchema.parse(r);
    assert.equal(r.phase, 'Failed');
    assert.equal(r.reason, 'Error');
    assert.equal(r.exitCode, 3);
    assert.equal(r.stdout, 'boom\n');
    assert.equal(r.stdoutBytes, 5);
    assert.equal(r.durationMs, 2000);
    assert.equal(r.finishedAt, '2026-01-01T00:00:02.000Z');
  });

  test('served by a pool pod: warm, running and finished (get_run on any replica says so)', () => {
    const running = resultFromRecord(
      recorded({ phase: 'Running', podName: 'python-abcde', served: 'warm', pool: 'python' }),
      spec,
      now,
    );
    assert.equal(running.served, 'warm');
    const done = resultFromRecord(
      recorded({
        phase: 'Succeeded',
        reason: 'Completed',
        exitCode: 0,
        served: 'warm',
        pool: 'python',
        output: { tail: 'hi\n', truncated: false, bytes: 3 },
      }),
      spec,
      now,
    );
    assert.equal(done.served, 'warm');
    assert.equal(done.stdout, 'hi\n');
    assert.equal(resultFromRecord(recorded({ phase: 'Running', podName: 'p' }), spec, now).served, 'cold');
  });

  test('a truncated tail says how much is not shown', () => {
    const r = resultFromRecord(
      recorded({
        phase: 'Succeeded',
        reason: 'Completed',
        exitCode: 0,
        output: { tail: 'end\n', truncated: true, bytes: 9000 },
      }),
      spec,
      now,
    );
    assert.equal(r.truncated, true);
    assert.match(r.stdout, /^\[… 8996 bytes not shown …\]\nend\n$/);
  });

  test('a status that does not parse (anyone with RBAC writes it) reads as Pending, not as a crash', () => {
    const r = resultFromRecord(recorded({ phase: 'Exploded' } as unknown as SandboxRun['status']), spec, now);
    assert.equal(r.phase, 'Pending');
  });
});

describe('tasks(): the owner’s task runs as any replica lists them', () => {
  test('selected by the owner’s task label in the owner’s namespace, checked by the owner annotation, newest first', async () => {
    const asked: string[] = [];
    const run = (name: string, owner: string, at: string): SandboxRun => {
      const r = buildSandboxRun(spec, {
        runId: name,
        namespace: 'team-a',
        principal: 'a',
        owner,
        task: true,
        ttlSecondsAfterFinished: 600,
        pendingTimeoutSeconds: 60,
      });
      return { ...r, metadata: { ...r.metadata, creationTimestamp: at } };
    };
    const api = {
      listRuns: (namespace: string, selector: string) => {
        asked.push(`${namespace} ${selector}`);
        return Promise.resolve([
          run('run-old', 'token:aaaa', '2026-01-01T00:00:00Z'),
          run('run-new', 'token:aaaa', '2026-01-01T00:01:00Z'),
          // A hash collision or a hand-made label: the annotation decides.
          run('run-other', 'token:bbbb', '2026-01-01T00:02:00Z'),
        ]);
      },
    } as unknown as RunApi;
    const records = createRunRecords({
      api,
      namespace: 'own',
      policy,
      cancelWaitMs: 10,
      watchTimeoutSeconds: 5,
    });
    assert.deepEqual(await records.tasks({ id: 'token:aaaa', namespace: 'team-a' }, 10), [
      { runId: 'run-new', createdAt: Date.parse('2026-01-01T00:01:00Z') },
      { runId: 'run-old', createdAt: Date.parse('2026-01-01T00:00:00Z') },
    ]);
    assert.deepEqual(asked, [`team-a ${LABEL_TASK_OF}=${principalLabelValue('token:aaaa')}`]);
    assert.equal((await records.tasks({ id: 'token:aaaa', namespace: 'team-a' }, 1)).length, 1);
  });
});
