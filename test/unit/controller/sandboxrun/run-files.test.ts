/**
 * Output files on Kubernetes, the operator's half: the cap a ConfigMap sets, the files taken from
 * the end of a pod log, the ConfigMap that keeps them, and what the status says of them.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  MAX_RUN_FILES_BYTES,
  RUN_FILES_MANIFEST,
  runFilesName,
} from '../../../../src/api/v1alpha1/run-files.js';
import { childName, LABEL_COMPONENT, LABEL_MANAGED_BY } from '../../../../src/api/v1alpha1/labels.js';
import { isControlledBy } from '../../../../src/controller/children.js';
import { buildFilesConfigMap } from '../../../../src/controller/sandboxrun/build-files-config-map.js';
import { computeStatus, type StatusInput } from '../../../../src/controller/sandboxrun/compute-status.js';
import { evaluateRun, withRunFilesCap } from '../../../../src/controller/sandboxrun/evaluate-run.js';
import { keepRunFiles } from '../../../../src/controller/sandboxrun/keep-files.js';
import { splitFiles } from '../../../../src/controller/sandboxrun/read-output.js';
import { NOTHING_SEEN } from '../../../../src/controller/sandboxrun/run-children.js';
import type { ConfigMap } from '../../../../src/kube/objects.js';
import { KubeApiError } from '../../../../src/kube/errors.js';
import { createPolicy } from '../../../../src/policy/policy.js';
import { encodeFilesBlock } from '../../../../src/runner/files-block.js';
import { encodeTrailer } from '../../../../src/runner/exit-trailer.js';
import { withoutTrailer } from '../../../../src/controller/sandboxrun/read-output.js';
import type { PodView } from '../../../../src/controller/pod/observe-pod.js';
import { effective, RUN } from '../fixtures.js';

const FILES = {
  files: [
    { path: 'plot.png', data: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2]) },
    { path: 'out/r.csv', data: Buffer.from('a,b\n') },
  ],
  skipped: [{ entry: 'x', reason: 'NoMatch' as const, message: 'nothing matches it' }],
};

const finishedPod: PodView = {
  name: 'p',
  uid: 'u',
  phase: 'Succeeded',
  reason: undefined,
  message: undefined,
  deleting: false,
  ready: false,
  waiting: undefined,
  unschedulable: undefined,
  startedAt: '2026-01-01T00:00:00Z',
  terminated: {
    exitCode: 0,
    reason: 'Completed',
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '2026-01-01T00:00:01Z',
    report: undefined,
    failure: undefined,
  },
};

describe('the cap a ConfigMap sets', () => {
  test('a run collects at most what its ConfigMap holds; the other caps stay', () => {
    const spec = effective({ template: 'python', code: '', outputs: ['*.png'] });
    const capped = withRunFilesCap(spec);
    assert.equal(capped.outputs.caps.maxBytes, MAX_RUN_FILES_BYTES);
    assert.equal(capped.outputs.caps.maxFiles, 32);
    assert.equal(capped.outputs.caps.inlineImageBytes, 1024 ** 2);
    assert.ok(MAX_RUN_FILES_BYTES < 1024 ** 2);
    const verdict = evaluateRun({ template: 'python', code: '', outputs: ['*.png'] }, createPolicy(), {
      networkPolicyEnforced: false,
    });
    assert.ok(verdict.allowed);
    assert.equal(verdict.effective.outputs.caps.maxBytes, MAX_RUN_FILES_BYTES);
    assert.ok(verdict.job.includes(Buffer.from('*.png')), 'the job names the entries');
  });
});

describe('the files at the end of a pod log', () => {
  const read = { caps: { maxFiles: 32, maxBytes: MAX_RUN_FILES_BYTES }, outputBytes: 1024 };

  test('the output before them, byte for byte; the files after; a pool pod’s trailer removed first', () => {
    const output = Buffer.from('hello\nworld');
    const log = Buffer.concat([output, encodeFilesBlock(FILES)]);
    assert.deepEqual(splitFiles(log, read), { output, files: FILES });
    const trailer = encodeTrailer(Buffer.alloc(16, 1), { kind: 'failure', message: 'x' });
    const pool = withoutTrailer(Buffer.concat([log, trailer]).toString('utf8'));
    assert.deepEqual(splitFiles(Buffer.from(pool, 'utf8'), read).files, FILES);
  });

  test('no block, or a bad one: the output is all there is, and no file is taken', () => {
    assert.deepEqual(splitFiles(Buffer.from('plain'), read), {
      output: Buffer.from('plain'),
      files: undefined,
    });
    const bad = Buffer.concat([Buffer.from('o'), Buffer.from('\n\x1esandpit-files\ngarbage\n')]);
    assert.deepEqual(splitFiles(bad, read), { output: Buffer.from('o'), files: undefined });
  });
});

describe('buildFilesConfigMap', () => {
  const cm = buildFilesConfigMap(RUN, FILES.files);

  test('named after the run’s pod, owned by the run, immutable, without the informer’s label', () => {
    assert.equal(cm.metadata?.name, `${childName(RUN.name, RUN.uid)}-files`);
    assert.equal(cm.metadata?.name, runFilesName(RUN.name, RUN.uid));
    assert.equal(cm.metadata?.namespace, RUN.namespace);
    assert.ok(isControlledBy(cm, RUN));
    assert.equal(cm.immutable, true);
    assert.equal(cm.metadata?.labels?.[LABEL_MANAGED_BY], undefined);
    assert.equal(cm.metadata?.labels?.[LABEL_COMPONENT], 'run-files');
  });

  test('the bytes under indexes, the paths in a manifest: no key the sandbox chose', () => {
    assert.deepEqual(Object.keys(cm.binaryData ?? {}), ['0', '1']);
    assert.deepEqual(Buffer.from(cm.binaryData!['1']!, 'base64'), Buffer.from('a,b\n'));
    assert.deepEqual(JSON.parse(cm.data![RUN_FILES_MANIFEST]!), ['plot.png', 'out/r.csv']);
  });
});

describe('keepRunFiles', () => {
  const asked = effective({ template: 'python', code: '', outputs: ['*.png', 'out/*.csv', 'x'] }).outputs;
  const observed = { ...NOTHING_SEEN, pod: finishedPod, files: FILES };

  function kube(existing?: ConfigMap) {
    const made: ConfigMap[] = [];
    return {
      made,
      createConfigMap: (_ns: string, body: ConfigMap) => {
        if (existing) {
          return Promise.reject(
            new KubeApiError('exists', { code: 'INVALID_REQUEST', status: 409, reason: 'AlreadyExists' }),
          );
        }
        made.push(body);
        return Promise.resolve(body);
      },
      getConfigMap: () => Promise.resolve(existing),
    };
  }

  test('keeps the files in the run’s ConfigMap, then says what was returned', async () => {
    const k = kube();
    const outputs = await keepRunFiles(k, RUN, asked, observed);
    assert.equal(k.made.length, 1);
    assert.deepEqual(
      outputs?.files.map((f) => [f.path, f.mimeType, f.delivery]),
      [
        ['plot.png', 'image/png', 'image'],
        ['out/r.csv', 'text/csv', 'link'],
      ],
    );
    assert.deepEqual(outputs?.skipped, FILES.skipped);
  });

  test('nothing before the pod finished, nor for a run that asked for none', async () => {
    assert.equal(await keepRunFiles(kube(), RUN, asked, { ...observed, pod: undefined }), undefined);
    assert.equal(await keepRunFiles(kube(), RUN, undefined, observed), undefined);
  });

  test('a pod that finished without its files: every entry named as not collected', async () => {
    const outputs = await keepRunFiles(kube(), RUN, asked, { ...observed, files: undefined });
    assert.deepEqual(
      outputs?.skipped.map((s) => [s.entry, s.reason]),
      [
        ['*.png', 'Unreadable'],
        ['out/*.csv', 'Unreadable'],
        ['x', 'Unreadable'],
      ],
    );
  });

  test('a ConfigMap of that name the run does not own keeps nothing, and says so', async () => {
    const other: ConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } };
    const outputs = await keepRunFiles(kube(other), RUN, asked, observed);
    assert.deepEqual(outputs?.files, []);
    assert.match(outputs?.skipped[0]?.message ?? '', /is not this run's/);
  });
});

test('computeStatus carries the outputs on the finished status, and only there', () => {
  const base: StatusInput = {
    generation: 1,
    createdAt: '2026-01-01T00:00:00Z',
    current: {},
    verdict: { allowed: true },
    cancel: false,
    pendingTimeoutSeconds: 60,
    podName: 'p',
    pod: finishedPod,
    blocked: undefined,
    podLost: false,
    output: undefined,
    outputs: { files: [], skipped: FILES.skipped, bytes: 0 },
    now: '2026-01-01T00:00:02Z',
  };
  assert.deepEqual(computeStatus(base).outputs, base.outputs);
  assert.equal(
    computeStatus({ ...base, pod: { ...finishedPod, phase: 'Running', terminated: undefined } }).outputs,
    undefined,
  );
});
