/** What goes in (files, env, stdin) and what comes out (streams, caps, binary), on the real engine. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import type { OutputChunk } from '../../../src/runner/capture.js';
import { makeBackend, runId, runToEnd, spec } from '../../support/docker.js';

let backend: DockerBackend;
before(async () => {
  backend = await makeBackend();
});
after(() => backend.close());

test('files land in the workspace with their paths, content and mode; env reaches the program', async () => {
  const r = await runToEnd(backend, {
    template: 'bash',
    code: 'cat data/in.txt; od -An -tx1 bin/blob | tr -d " \\n"; echo; ./bin/tool; echo "$GREETING"; pwd',
    files: [
      { path: 'data/in.txt', content: 'line one\n' },
      { path: 'bin/blob', content: Buffer.from([0, 1, 254, 255]).toString('base64'), encoding: 'base64' },
      { path: 'bin/tool', content: '#!/bin/sh\necho tool ran\n', executable: true },
    ],
    env: [{ name: 'GREETING', value: 'hi there' }],
  });
  assert.equal(r.phase, 'Succeeded', r.stderr);
  assert.equal(r.stdout, 'line one\n0001feff\ntool ran\nhi there\n/workspace\n');
});

test('stdout and stderr stay separate and stream while the program runs', async () => {
  const execution = backend.start(
    spec({
      template: 'python',
      code: 'import sys, time\nprint("first")\nprint("oops", file=sys.stderr)\ntime.sleep(1)\nprint("second")',
    }),
    { runId: runId() },
  );
  const seen: { chunk: OutputChunk; at: number }[] = [];
  for await (const chunk of execution.output) seen.push({ chunk, at: performance.now() });
  const resultAt = performance.now();
  const r = await execution.result;
  assert.equal(r.stdout, 'first\nsecond\n');
  assert.equal(r.stderr, 'oops\n');
  const first = seen.find((s) => s.chunk.data.toString().includes('first'));
  assert.ok(first, 'first line streamed');
  assert.ok(resultAt - first.at > 800, 'the first line arrived about a second before the end');
});

test('a 50 MB output flood is truncated with exact counts, and our memory grows by less than 64 MB', async () => {
  global.gc?.();
  const before = process.memoryUsage().rss;
  const r = await runToEnd(backend, {
    template: 'python',
    code: 'import sys\nchunk = "x" * 1023 + "\\n"\nfor _ in range(51200): sys.stdout.write(chunk)\nsys.stdout.write("END\\n")',
  });
  const grown = process.memoryUsage().rss - before;
  assert.equal(r.phase, 'Succeeded', r.stderr);
  assert.equal(r.stdoutBytes, 51200 * 1024 + 4);
  assert.equal(r.truncated, true);
  assert.ok(r.stdout.startsWith('xxxx'));
  assert.ok(r.stdout.endsWith('x\nEND\n'));
  assert.match(r.stdout, /\[… \d+ bytes truncated …\]/);
  assert.ok(Buffer.byteLength(r.stdout) < 1024 * 1024 + 100, `kept ${Buffer.byteLength(r.stdout)} bytes`);
  assert.ok(grown < 64 * 1024 ** 2, `rss grew ${(grown / 1024 ** 2).toFixed(1)} MB`);
});

test('binary output is detected and summarised, not dumped', async () => {
  const r = await runToEnd(backend, { template: 'bash', code: 'head -c 4096 /dev/urandom; echo done >&2' });
  assert.equal(r.phase, 'Succeeded');
  assert.equal(r.binaryOutput, true);
  assert.equal(r.stdoutBytes, 4096);
  assert.equal(r.stdout, '[binary output: 4096 bytes, not shown]');
  assert.equal(r.stderr, 'done\n');
});

test('UTF-8 text is not mistaken for binary', async () => {
  const r = await runToEnd(backend, { template: 'python', code: 'print("héllo wörld ✓ 日本語")' });
  assert.equal(r.binaryOutput, false);
  assert.equal(r.stdout, 'héllo wörld ✓ 日本語\n');
});

test('a command that does not exist exits 127 with a message', async () => {
  const r = await runToEnd(backend, { template: 'bash', command: ['no-such-program'] });
  assert.equal(r.exitCode, 127);
  assert.match(r.stderr, /cannot run no-such-program/);
});
