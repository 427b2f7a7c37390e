import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { classify, type RunFacts } from '../../../src/api/outcome.js';
import { buildResult, networkHint, NO_NETWORK_HINT, PROXY_REFUSAL_HINT } from '../../../src/api/result.js';
import { RunResultSchema } from '../../../src/api/run.js';
import { NO_OUTPUTS, type EffectiveSpec } from '../../../src/policy/evaluate.js';

const base: RunFacts = { exitCode: 0, timedOut: false, oomKilled: false, cancelled: false };
const outcome = (facts: Partial<RunFacts>) => classify({ ...base, ...facts });

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
  network: { egress: 'none' },
  runtime: 'runsc',
  workdir: '/workspace',
  outputs: NO_OUTPUTS,
};

describe('buildResult', () => {
  const input = {
    runId: 'run-1',
    subject: spec,
    outcome: outcome({}),
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
      buildResult({ ...input, outcome: outcome({ timedOut: true, exitCode: null }) }).timedOut,
      true,
    );
    // a cancelled run that also hit its deadline is Cancelled, so not timedOut
    const c = buildResult({ ...input, outcome: outcome({ timedOut: true, cancelled: true }) });
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
      subject: { ...spec, template: undefined, runtime: undefined },
      outcome: outcome({ exitCode: null, failure: 'engine said no' }),
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

test('a live run: no finishedAt, the duration so far', () => {
  const r = buildResult({
    runId: 'run-2',
    subject: { template: 'python', image: 'sandpit/python:3.11', runtime: undefined, limits: spec.limits },
    outcome: { phase: 'Running', exitCode: null },
    startedAt: 1000,
    finishedAt: undefined,
    now: 1500,
    backend: 'docker',
  });
  assert.equal(r.phase, 'Running');
  assert.equal(r.durationMs, 500);
  assert.equal(r.timedOut, false);
  assert.equal('finishedAt' in r, false);
  assert.equal('reason' in r, false);
  assert.ok(RunResultSchema.safeParse(r).success);
});

describe('a failed name lookup or connection says the sandbox has no network', () => {
  const spec = {
    template: 'python',
    image: 'sandpit/python:3.11',
    argv: ['python3'],
    code: undefined,
    files: [],
    stdin: Buffer.alloc(0),
    env: [],
    limits: {
      cpuMilli: 1000,
      memoryBytes: 1 << 28,
      pids: 64,
      workspaceBytes: 1024,
      tmpBytes: 1024,
      timeoutSeconds: 10,
      outputBytes: 4096,
      fileSizeBytes: 1024,
      openFiles: 64,
    },
    network: { egress: 'none' },
    runtime: undefined,
    workdir: '/workspace',
    outputs: NO_OUTPUTS,
  } satisfies EffectiveSpec;
  const stream = (text: string) => ({ text, bytes: text.length, truncated: false, binary: false });
  const result = (stderr: string) =>
    buildResult({
      runId: 'run-1',
      subject: spec,
      outcome: outcome({ exitCode: 1 }),
      stderr: stream(stderr),
      startedAt: 0,
      finishedAt: 1,
      backend: 'docker',
    });
  const MESSAGES: [string, string][] = [
    ['python / glibc', 'socket.gaierror: [Errno -3] Temporary failure in name resolution'],
    ['glibc, unknown name', 'socket.gaierror: [Errno -2] Name or service not known'],
    ['node, unknown name', 'Error: getaddrinfo ENOTFOUND pypi.org'],
    ['node, lookup failed for now', 'Error: getaddrinfo EAI_AGAIN registry.npmjs.org'],
    ['curl', 'curl: (6) Could not resolve host: example.com'],
    ['connect without a route', 'OSError: [Errno 101] Network is unreachable'],
  ];
  for (const [name, stderr] of MESSAGES) {
    test(name, () => {
      const r = result(`Traceback (most recent call last):\n  …\n${stderr}\n`);
      assert.equal(r.hint, 'this sandbox has no network (egress: none)');
      assert.equal(networkHint(stderr), NO_NETWORK_HINT);
      assert.ok(RunResultSchema.safeParse(r).success);
    });
  }
  test('other errors carry no hint', () => {
    assert.equal('hint' in result('ValueError: boom\n'), false);
    assert.equal(networkHint('ZeroDivisionError: division by zero'), undefined);
    assert.equal(
      networkHint(
        "OSError: Tunnel connection failed: 403 Forbidden (sandpit egress: evil.com is not in this sandbox's allowlist)",
      ),
      PROXY_REFUSAL_HINT,
    );
  });
});
