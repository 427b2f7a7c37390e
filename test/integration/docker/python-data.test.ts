/**
 * The python-data template on the real engine (issue 18): matplotlib draws without a display and
 * its font cache is in the image; the template's default outputs are the workspace's top-level
 * *.png, *.jpg and *.svg; a figure left open at exit, or shown, is saved and returned too.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RunResult } from '../../../src/api/run.js';
import type { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import type { RunRequestInput } from '../../../src/api/run.js';
import { makeBackend, runToEnd, testTemplates } from '../../support/docker.js';

/** A run on the built-in templates, or on SANDPIT_TEST_IMAGE_REPO's images of them. */
const run = (request: RunRequestInput): Promise<RunResult> =>
  runToEnd(backend, request, { templates: testTemplates() });

let backend: DockerBackend;
before(async () => {
  backend = await makeBackend();
});
after(() => backend.close());

const paths = (r: RunResult) => r.outputs?.files.map((f) => [f.path, f.mimeType, f.delivery]);

test('by default: top-level *.png, *.jpg and *.svg, each an image; nothing else, nothing deeper', async () => {
  const r = await run({
    template: 'python-data',
    code: [
      'import os, matplotlib.pyplot as plt',
      'plt.plot([1, 2, 3])',
      'for name in ("a.png", "b.jpg", "c.svg"): plt.savefig(name)',
      'os.makedirs("sub"); plt.savefig("sub/deep.png")',
      'open("notes.txt", "w").write("x")',
    ].join('\n'),
  });
  assert.equal(r.phase, 'Succeeded', r.stderr);
  assert.equal(r.stderr, '', 'no warning: the backend draws without a display, the font cache is there');
  assert.deepEqual(paths(r), [
    ['a.png', 'image/png', 'image'],
    ['b.jpg', 'image/jpeg', 'image'],
    ['c.svg', 'image/svg+xml', 'image'],
  ]);
  assert.deepEqual(r.outputs?.skipped, []);
});

test('a figure shown with plt.show(), and one never closed, are saved and returned; a saved one only once', async () => {
  const r = await run({
    template: 'python-data',
    code: [
      'import matplotlib.pyplot as plt',
      'plt.plot([1, 2]); plt.savefig("mine.png")',
      'plt.figure(); plt.plot([2, 1]); plt.show()',
      'plt.figure(); plt.hist([1, 1, 2])',
    ].join('\n'),
  });
  assert.equal(r.phase, 'Succeeded', r.stderr);
  assert.deepEqual(paths(r), [
    ['figure_2.png', 'image/png', 'image'],
    ['figure_3.png', 'image/png', 'image'],
    ['mine.png', 'image/png', 'image'],
  ]);
});

test('a program that fails after plotting still returns its figure; asked outputs replace the default', async () => {
  const failed = await run({
    template: 'python-data',
    code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nraise SystemExit(2)',
  });
  assert.equal(failed.exitCode, 2);
  assert.deepEqual(paths(failed), [['figure_1.png', 'image/png', 'image']]);
  const asked = await run({
    template: 'python-data',
    code: 'import pandas as pd\npd.DataFrame({"a": [1]}).to_csv("t.csv")\nopen("x.png", "wb").write(b"no")',
    outputs: ['t.csv'],
  });
  assert.deepEqual(paths(asked), [['t.csv', 'text/csv', 'link']]);
});

test('the other templates collect nothing unless asked', async () => {
  const r = await run({ template: 'python', code: 'open("p.png", "wb").write(b"x")' });
  assert.equal(r.outputs, undefined);
});
