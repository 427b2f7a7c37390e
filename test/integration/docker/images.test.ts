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
  'python-data': {
    argv: [
      'python3',
      '-c',
      'import sys, numpy, pandas, matplotlib, scipy, PIL; print("Python", sys.version.split()[0], numpy.__version__, pandas.__version__, matplotlib.__version__, scipy.__version__, PIL.__version__)',
    ],
    expect: /^Python 3\.11\.\d+ 1\.24\.\d+ 1\.5\.\d+ 3\.6\.\d+ 1\.10\.\d+ 9\.4\.\d+$/,
  },
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

test('`python` is python3, and pip and venv import: docker run --rm --network none sandpit/python:3.11', () => {
  const r = spawnSync(
    'docker',
    [
      'run',
      '--rm',
      '--label',
      'sandpit.dev/managed-by=sandpit',
      '--network',
      'none',
      'sandpit/python:3.11',
      'python',
      '-c',
      'import pip, venv, sys; print(sys.version_info[:2])',
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, '(3, 11)\n');
});

test('the seed\'s REST example runs verbatim: ["python", "script.py"] in python:3.11', async () => {
  const r = await runToEnd(backend, {
    image: 'python:3.11',
    command: ['python', 'script.py'],
    files: [{ path: 'script.py', content: 'print(sum(range(10)))\n' }],
  });
  assert.equal(r.phase, 'Succeeded', r.stderr);
  assert.equal(r.stdout, '45\n');
});

// A wheel built in the sandbox with zipfile (no index, no setuptools run), installed by a plain
// `pip install`: without PEP 668's marker pip falls back to a user install under HOME (/tmp).
const MAKE_WHEEL = `
import base64, hashlib, zipfile
name, dist = "sandpit_probe", "sandpit_probe-1.0.dist-info"
files = {
    f"{name}/__init__.py": b"ANSWER = 42\\n",
    f"{dist}/METADATA": b"Metadata-Version: 2.1\\nName: sandpit-probe\\nVersion: 1.0\\n",
    f"{dist}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: sandpit-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
record = "".join(f"{path},{digest(data)},{len(data)}\\n" for path, data in files.items()) + f"{dist}/RECORD,,\\n"
with zipfile.ZipFile("sandpit_probe-1.0-py3-none-any.whl", "w") as whl:
    for path, data in files.items():
        whl.writestr(path, data)
    whl.writestr(f"{dist}/RECORD", record)
`;

test('pip install of a local wheel (--no-index) works as uid 1000 on the read-only root, and the module imports', async () => {
  const r = await runToEnd(backend, {
    template: 'python',
    command: [
      'sh',
      '-c',
      'python make_wheel.py && pip install --no-index --no-cache-dir ./sandpit_probe-1.0-py3-none-any.whl >&2 && python -c "import sandpit_probe; print(sandpit_probe.ANSWER)"',
    ],
    files: [{ path: 'make_wheel.py', content: MAKE_WHEEL }],
    timeoutSeconds: 30,
  });
  assert.equal(r.phase, 'Succeeded', r.stderr);
  assert.equal(r.stdout, '42\n');
  assert.match(r.stderr, /Successfully installed sandpit-probe-1\.0/);
  assert.doesNotMatch(r.stderr, /externally-managed-environment/);
});

test("the python image has no PEP 668 marker, so pip works outside sandpit's template too", async () => {
  const r = await runToEnd(backend, {
    image: 'sandpit/python:3.11',
    command: [
      'sh',
      '-c',
      'ls /usr/lib/python3*/EXTERNALLY-MANAGED 2>&1; python -c "import pip, venv; print(pip.__version__ != None)"',
    ],
  });
  assert.equal(r.phase, 'Succeeded', r.stderr);
  assert.match(r.stdout, /No such file or directory/);
  assert.match(r.stdout, /True\n$/);
});

test('rebuilding the images is a no-op: every image found up to date, none rebuilt', async (t) => {
  const ids = await Promise.all(
    BUILTIN_TEMPLATES.map(async (tpl) => (await docker.getImage(tpl.image).inspect()).Id),
  );
  const t0 = performance.now();
  const r = spawnSync('bash', ['images/build.sh'], { encoding: 'utf8' });
  t.diagnostic(`a no-op build: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /==> all \d+ image\(s\) up to date/, r.stderr);
  const after = await Promise.all(
    BUILTIN_TEMPLATES.map(async (tpl) => (await docker.getImage(tpl.image).inspect()).Id),
  );
  assert.deepEqual(after, ids);
});
