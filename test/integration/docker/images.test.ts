/** The sandbox images: present after the build, uid 1000, their runtime and the runner inside, and a rebuild that changes nothing. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import type Docker from 'dockerode';
import type { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { BUILTIN_TEMPLATES } from '../../../src/policy/templates.js';
import { makeBackend, requireDocker, runToEnd } from '../../support/docker.js';

let docker: Docker;
let backend: DockerBackend;
before(async () => {
  docker = await requireDocker();
  backend = await makeBackend(docker);
});
after(() => backend.close());

const VERSION: Record<string, { argv: string[]; expect: RegExp }> = {
  python: { argv: ['python3', '--version'], expect: /^Python 3\.11\./ },
  node: { argv: ['node', '--version'], expect: /^v18\./ },
  bash: { argv: ['bash', '--version'], expect: /^GNU bash, version 5\./ },
  c: { argv: ['gcc', '--version'], expect: /^gcc .* 12\./ },
  rust: { argv: ['rustc', '--version'], expect: /^rustc 1\./ },
};

for (const template of BUILTIN_TEMPLATES) {
  test(`${template.image}: labelled, runs as uid 1000, has the runner, timeout and its runtime`, async () => {
    const info = await docker.getImage(template.image).inspect();
    assert.equal(info.Config.Labels?.['sandpit.dev/managed-by'], 'sandpit');
    assert.equal(info.Config.User, '1000:1000');
    assert.equal(info.Config.WorkingDir, '/workspace');
    const { argv, expect } = VERSION[template.name]!;
    const r = await runToEnd(backend, {
      template: template.name,
      command: [
        'sh',
        '-c',
        'id -u; id -g; command -v timeout; test -x /usr/local/bin/sandpit-runner && echo runner; "$@"',
        'sh',
        ...argv,
      ],
    });
    assert.equal(r.phase, 'Succeeded', r.stderr);
    const [uid, gid, timeout, runner, version] = r.stdout.split('\n');
    assert.equal(uid, '1000');
    assert.equal(gid, '1000');
    assert.match(timeout ?? '', /timeout$/);
    assert.equal(runner, 'runner');
    assert.match(version ?? '', expect);
  });
}

test('python:3.11 is the same image as sandpit/python:3.11 (the seed examples run verbatim)', async () => {
  const [a, b] = await Promise.all([
    docker.getImage('python:3.11').inspect(),
    docker.getImage('sandpit/python:3.11').inspect(),
  ]);
  assert.equal(a.Id, b.Id);
});

test('the python image has the full standard library', async () => {
  const r = await runToEnd(backend, {
    template: 'python',
    code: 'import json, sqlite3, subprocess, ssl, venv, decimal, zoneinfo, ctypes, asyncio\nprint(json.dumps({"ok": sqlite3.sqlite_version != ""}))',
  });
  assert.equal(r.stdout, '{"ok": true}\n', r.stderr);
});

test('rebuilding the images is a fast no-op', async () => {
  const ids = await Promise.all(
    BUILTIN_TEMPLATES.map(async (t) => (await docker.getImage(t.image).inspect()).Id),
  );
  const t0 = performance.now();
  const r = spawnSync('bash', ['images/build.sh'], { encoding: 'utf8' });
  const seconds = (performance.now() - t0) / 1000;
  assert.equal(r.status, 0, r.stderr);
  assert.ok(seconds < 15, `a no-op build took ${seconds.toFixed(1)} s`);
  const after = await Promise.all(
    BUILTIN_TEMPLATES.map(async (t) => (await docker.getImage(t.image).inspect()).Id),
  );
  assert.deepEqual(after, ids);
});
