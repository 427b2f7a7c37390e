/** Hello world in every template, compiled languages included, on the real engine. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { makeBackend, runToEnd } from '../../support/docker.js';

let backend: DockerBackend;
before(async () => {
  backend = await makeBackend();
});
after(() => backend.close());

const HELLO: Record<string, { code: string; version: RegExp }> = {
  python: { code: 'import sys\nprint("hello from python", sys.version.split()[0])', version: /3\.11\./ },
  'python-data': {
    code: 'import sys, numpy\nprint("hello from python-data", sys.version.split()[0], numpy.arange(3).sum())',
    version: /3\.11\.\d+ 3$/m,
  },
  node: { code: 'console.log("hello from node", process.version)', version: /v18\./ },
  bash: { code: 'echo "hello from bash $BASH_VERSION"', version: /5\.\d/ },
  c: {
    code: '#include <stdio.h>\nint main(void) { printf("hello from c %d\\n", __GNUC__); return 0; }',
    version: /12/,
  },
  rust: { code: 'fn main() { println!("hello from rust {}", 1 + 1); }', version: /2/ },
};

for (const [template, { code, version }] of Object.entries(HELLO)) {
  test(`${template}: hello world`, async () => {
    const r = await runToEnd(backend, { template, code, timeoutSeconds: 30 });
    assert.equal(r.phase, 'Succeeded', `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^hello from ${template} `));
    assert.match(r.stdout, version);
    assert.equal(r.template, template);
  });
}

test('c: a compile error is reported as the program failing, with the compiler output', async () => {
  const r = await runToEnd(backend, { template: 'c', code: 'int main(void) { return missing; }' });
  assert.equal(r.phase, 'Failed');
  assert.equal(r.reason, 'Error');
  assert.equal(r.exitCode, 1);
  assert.match(r.stderr, /.missing. undeclared/);
});

test('c: arguments after the code reach the compiled program', async () => {
  const r = await runToEnd(backend, {
    template: 'c',
    code: '#include <stdio.h>\nint main(int c, char **v) { for (int i = 1; i < c; i++) puts(v[i]); return c; }',
    command: [
      '/bin/sh',
      '-c',
      'gcc -o /tmp/main /sandpit/code/main.c && exec /tmp/main "$@"',
      'main',
      'one',
      'two',
    ],
  });
  assert.equal(r.stdout, 'one\ntwo\n');
  assert.equal(r.exitCode, 3);
});

test('rust: cargo builds a crate without dependencies offline and runs it', async () => {
  const r = await runToEnd(backend, {
    template: 'rust',
    command: ['cargo', 'run', '--offline', '--quiet', '--release'],
    files: [
      {
        path: 'Cargo.toml',
        content: '[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
      },
      { path: 'src/main.rs', content: 'fn main() { println!("cargo says {}", 6 * 7); }\n' },
    ],
    timeoutSeconds: 30,
  });
  assert.equal(r.phase, 'Succeeded', r.stderr);
  assert.equal(r.stdout, 'cargo says 42\n');
});

test('an explicit argv runs in the image of a template', async () => {
  const r = await runToEnd(backend, { template: 'bash', command: ['sh', '-c', 'echo "$0 $1"', 'a', 'b'] });
  assert.equal(r.stdout, 'a b\n');
});
