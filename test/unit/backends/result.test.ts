import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RunResultSchema } from '../../../src/api/run.js';
import { buildResult, classify, type RunFacts } from '../../../src/backends/result.js';
import type { EffectiveSpec } from '../../../src/policy/evaluate.js';

const base: RunFacts = { exitCode: 0, timedOut: false, oomKilled: false, cancelled: false };

describe('classify', () => {
  const cases: { name: string; facts: Partial<RunFacts>; phase: string; reason: string; message?: RegExp }[] =
    [
      { name: 'exit 0', facts: {}, phase: 'Succeeded', reason: 'Completed' },
      {
        name: 'exit 1',
        facts: { exitCode: 1 },
        phase: 'Failed',
        reason: 'Error',
        message: /exited with code 1$/,
      },
      { name: 'exit 137', facts: { exitCode: 137 }, phase: 'Failed', reason: 'Error', message: /code 137/ },
      {
        name: 'no exit code',
        facts: { exitCode: null },
        phase: 'Failed',
        reason: 'Error',
        message: /code unknown/,
      },
      {
        name: 'failure',
        facts: { failure: 'runner crashed' },
        phase: 'Failed',
        reason: 'BackendError',
        message: /^runner crashed$/,
      },
      { name: 'empty failure message', facts: { failure: '' }, phase: 'Failed', reason: 'BackendError' },
      {
        name: 'OOM',
        facts: { oomKilled: true, exitCode: 137 },
        phase: 'Failed',
        reason: 'OOMKilled',
        message: /out of memory/,
      },
      {
        name: 'timed out',
        facts: { timedOut: true, exitCode: 137 },
        phase: 'TimedOut',
        reason: 'DeadlineExceeded',
        message: /deadline/,
      },
      {
        name: 'cancelled',
        facts: { cancelled: true, exitCode: null },
        phase: 'Cancelled',
        reason: 'Cancelled',
        message: /cancelled/,
      },
      // precedence: cancelled > timedOut > oomKilled > failure > exit code
      {
        name: 'cancelled beats everything',
        facts: { cancelled: true, timedOut: true, oomKilled: true, failure: 'x', exitCode: 1 },
        phase: 'Cancelled',
        reason: 'Cancelled',
      },
      {
        name: 'timedOut beats OOM, failure and exit',
        facts: { timedOut: true, oomKilled: true, failure: 'x', exitCode: 0 },
        phase: 'TimedOut',
        reason: 'DeadlineExceeded',
      },
      {
        name: 'OOM beats failure and exit 0',
        facts: { oomKilled: true, failure: 'x', exitCode: 0 },
        phase: 'Failed',
        reason: 'OOMKilled',
      },
      {
        name: 'failure beats exit 0',
        facts: { failure: 'x', exitCode: 0 },
        phase: 'Failed',
        reason: 'BackendError',
      },
    ];
  for (const c of cases) {
    test(c.name, () => {
      const r = classify({ ...base, ...c.facts });
      assert.equal(r.phase, c.phase);
      assert.equal(r.reason, c.reason);
      if (c.message) assert.match(r.message ?? '', c.message);
      if (c.phase === 'Succeeded') assert.equal(r.message, undefined);
    });
  }
});

describe('buildResult', () => {
  const spec: EffectiveSpec = {
    template: 'python',
    image: 'sandpit/python:3.11',
    argv: ['python3'],
    code: undefined,
    files: [],
    stdin: Buffer.alloc(0),
    env: [],
    limits: {
      cpuMilli: 500,
      memoryBytes: 256 * 1024 ** 2,
      pids: 64,
      workspaceBytes: 1024,
      tmpBytes: 2048,
      timeoutSeconds: 10,
      outputBytes: 4096,
      fileSizeBytes: 2048,
      openFiles: 1024,
    },
    network: 'none',
    runtime: 'runsc',
    workdir: '/workspace',
  };
  const input = {
    runId: 'run-1',
    spec,
    facts: { ...base },
    startedAt: Date.UTC(2026, 0, 1, 0, 0, 0),
    finishedAt: Date.UTC(2026, 0, 1, 0, 0, 1, 250),
    backend: 'docker',
  };

  test('a success with output: every field', () => {
    const r = buildResult({
      ...input,
      served: 'warm',
      stdout: { text: 'hi\n', bytes: 3, truncated: false, binary: false },
      stderr: { text: '', bytes: 0, truncated: false, binary: false },
    });
    assert.deepEqual(r, {
      runId: 'run-1',
      phase: 'Succeeded',
      reason: 'Completed',
      exitCode: 0,
      timedOut: false,
      stdout: 'hi\n',
      stderr: '',
      truncated: false,
      stdoutBytes: 3,
      stderrBytes: 0,
      binaryOutput: false,
      durationMs: 1250,
      template: 'python',
      image: 'sandpit/python:3.11',
      runtime: 'runsc',
      backend: 'docker',
      served: 'warm',
      limits: {
        cpu: '500m',
        memoryBytes: 256 * 1024 ** 2,
        pids: 64,
        workspaceBytes: 1024,
        tmpBytes: 2048,
        timeoutSeconds: 10,
        outputBytes: 4096,
      },
      createdAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:00:01.250Z',
    });
    assert.ok(RunResultSchema.safeParse(r).success);
  });

  test('timedOut is true exactly when the phase is TimedOut', () => {
    assert.equal(
      buildResult({ ...input, facts: { ...base, timedOut: true, exitCode: null } }).timedOut,
      true,
    );
    // a cancelled run that also hit its deadline is Cancelled, so not timedOut
    const c = buildResult({ ...input, facts: { ...base, timedOut: true, cancelled: true } });
    assert.equal(c.phase, 'Cancelled');
    assert.equal(c.timedOut, false);
  });

  test('truncated and binaryOutput are true when either stream is', () => {
    const plain = { text: '', bytes: 0, truncated: false, binary: false };
    const r = buildResult({
      ...input,
      stdout: plain,
      stderr: { text: 'x', bytes: 9, truncated: true, binary: true },
    });
    assert.equal(r.truncated, true);
    assert.equal(r.binaryOutput, true);
    assert.equal(r.stderrBytes, 9);
  });

  test('no streams: empty output; no template or runtime: fields left out; a failure carries its message', () => {
    const r = buildResult({
      ...input,
      spec: { ...spec, template: undefined, runtime: undefined },
      facts: { ...base, exitCode: null, failure: 'engine said no' },
    });
    assert.equal(r.stdout, '');
    assert.equal(r.stdoutBytes, 0);
    assert.equal(r.message, 'engine said no');
    assert.equal('template' in r, false);
    assert.equal('runtime' in r, false);
    assert.equal('served' in r, false);
    assert.equal(r.exitCode, null);
  });
});
