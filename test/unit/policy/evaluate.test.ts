import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RunRequestSchema, type RunRequestInput } from '../../../src/api/run.js';
import type { Violation } from '../../../src/shared/errors.js';
import type { Scope } from '../../../src/policy/decision.js';
import { evaluate, type EffectiveSpec } from '../../../src/policy/evaluate.js';
import { OPEN_FILES } from '../../../src/policy/limits.js';
import {
  createPolicy,
  DEFAULT_CEILINGS,
  type Policy,
  type PolicyOptions,
} from '../../../src/policy/policy.js';
import { BUILTIN_TEMPLATES } from '../../../src/policy/templates.js';

const MiB = 1024 ** 2;

function ok(input: RunRequestInput, policy: Policy = createPolicy(), scope?: Scope): EffectiveSpec {
  const r = evaluate(RunRequestSchema.parse(input), policy, scope);
  assert.ok(r.ok, `expected ok, got ${JSON.stringify(r)}`);
  return r.spec;
}

function denied(input: RunRequestInput, policy: Policy = createPolicy(), scope?: Scope): Violation[] {
  const r = evaluate(RunRequestSchema.parse(input), policy, scope);
  assert.ok(!r.ok, 'expected violations');
  return r.violations;
}

const py = (extra: Partial<RunRequestInput> = {}): RunRequestInput => ({
  template: 'python',
  code: 'print(1)',
  ...extra,
});
const policyWith = (o: PolicyOptions): Policy => createPolicy(o);

describe('the effective spec', () => {
  test('python with no limits asked: template image, command, code path and env; ceilings as defaults', () => {
    const spec = ok(py());
    assert.equal(spec.template, 'python');
    assert.equal(spec.image, 'sandpit/python:3.11');
    assert.deepEqual(spec.argv, ['python3', '/sandpit/code/main.py']);
    assert.deepEqual(spec.code, { path: '/sandpit/code/main.py', content: Buffer.from('print(1)') });
    assert.deepEqual(spec.env, [
      { name: 'PYTHONUNBUFFERED', value: '1' },
      { name: 'PYTHONDONTWRITEBYTECODE', value: '1' },
    ]);
    assert.deepEqual(spec.files, []);
    assert.deepEqual(spec.stdin, Buffer.alloc(0));
    assert.deepEqual(spec.network, { egress: 'none' });
    assert.equal(spec.runtime, undefined);
    assert.equal(spec.workdir, '/workspace');
    assert.deepEqual(spec.limits, {
      cpuMilli: 1000,
      memoryBytes: 512 * MiB,
      pids: 128,
      workspaceBytes: 64 * MiB,
      tmpBytes: 64 * MiB,
      timeoutSeconds: 30,
      outputBytes: MiB,
      fileSizeBytes: 64 * MiB,
      openFiles: OPEN_FILES,
    });
  });

  test('the template is found by alias and reported by its name', () => {
    const spec = ok({ template: 'py', code: 'x' });
    assert.equal(spec.template, 'python');
    assert.equal(spec.image, 'sandpit/python:3.11');
  });

  test('every built-in template evaluates with its image and code file', () => {
    for (const t of BUILTIN_TEMPLATES) {
      const spec = ok({ template: t.name, code: 'x' });
      assert.equal(spec.image, t.image);
      assert.equal(spec.code?.path, `/sandpit/code/${t.fileName}`);
      assert.deepEqual(spec.argv, t.command);
    }
  });

  test('limits below the ceilings are used as asked', () => {
    const spec = ok(
      py({
        resources: { cpu: '500m', memory: '128m', pids: 32, ephemeralStorage: '16Mi' },
        timeoutSeconds: 5,
      }),
    );
    assert.equal(spec.limits.cpuMilli, 500);
    assert.equal(spec.limits.memoryBytes, 128 * MiB);
    assert.equal(spec.limits.pids, 32);
    assert.equal(spec.limits.workspaceBytes, 16 * MiB);
    assert.equal(spec.limits.timeoutSeconds, 5);
    // fsize is the larger writable area
    assert.equal(spec.limits.fileSizeBytes, 64 * MiB);
  });

  test('limits exactly at the ceilings are allowed', () => {
    const spec = ok(
      py({ resources: { cpu: 1, memory: '512Mi', pids: 128, ephemeralStorage: '64m' }, timeoutSeconds: 30 }),
    );
    assert.equal(spec.limits.cpuMilli, 1000);
    assert.equal(spec.limits.memoryBytes, 512 * MiB);
  });

  test('fileSizeBytes follows a workspace larger than /tmp', () => {
    const spec = ok(
      py({ resources: { ephemeralStorage: '200m' } }),
      policyWith({ ceilings: { workspaceBytes: 256 * MiB, tmpBytes: 8 * MiB } }),
    );
    assert.equal(spec.limits.workspaceBytes, 200 * MiB);
    assert.equal(spec.limits.tmpBytes, 8 * MiB);
    assert.equal(spec.limits.fileSizeBytes, 200 * MiB);
  });

  test('an explicit command replaces the template command; code still goes to its path', () => {
    const spec = ok({ template: 'python', code: 'x', command: ['python3', '-c', 'print(2)'] });
    assert.deepEqual(spec.argv, ['python3', '-c', 'print(2)']);
    assert.equal(spec.code?.path, '/sandpit/code/main.py');
  });

  test('an image with a command and no template: no template, no code, no template env', () => {
    const spec = ok({ image: 'python:3.11', command: ['python3', '-V'] });
    assert.equal(spec.template, undefined);
    assert.equal(spec.image, 'python:3.11');
    assert.deepEqual(spec.argv, ['python3', '-V']);
    assert.equal(spec.code, undefined);
    assert.deepEqual(spec.env, []);
  });

  test('a request image overrides the template image (and is normalised)', () => {
    assert.equal(
      ok({ template: 'python', code: 'x', image: 'docker.io/library/python:3.11' }).image,
      'python:3.11',
    );
  });

  test('request env overrides template env, order kept, new names appended', () => {
    const spec = ok(
      py({
        env: [
          { name: 'FOO', value: 'bar' },
          { name: 'PYTHONUNBUFFERED', value: '0' },
        ],
      }),
    );
    assert.deepEqual(spec.env, [
      { name: 'PYTHONUNBUFFERED', value: '0' },
      { name: 'PYTHONDONTWRITEBYTECODE', value: '1' },
      { name: 'FOO', value: 'bar' },
    ]);
  });

  test('files are decoded (utf8 and base64) with their executable flag; stdin is bytes', () => {
    const spec = ok(
      py({
        files: [
          { path: 'a.txt', content: 'héllo' },
          {
            path: 'bin/run',
            content: Buffer.from([0, 1, 2, 255]).toString('base64'),
            encoding: 'base64',
            executable: true,
          },
        ],
        stdin: 'in\n',
      }),
    );
    assert.deepEqual(spec.files, [
      { path: 'a.txt', content: Buffer.from('héllo', 'utf8'), executable: false },
      { path: 'bin/run', content: Buffer.from([0, 1, 2, 255]), executable: true },
    ]);
    assert.deepEqual(spec.stdin, Buffer.from('in\n'));
  });

  test('the policy default runtime applies when the request names none', () => {
    assert.equal(ok(py(), policyWith({ defaultRuntime: 'runsc' })).runtime, 'runsc');
  });

  test('the argv is a copy: changing the spec does not change the template', () => {
    const spec = ok(py());
    spec.argv.push('extra');
    assert.deepEqual(ok(py()).argv, ['python3', '/sandpit/code/main.py']);
  });
});

describe('template defaults are clamped by the ceilings', () => {
  const cases: {
    name: string;
    policy: Policy;
    template: string;
    want: { timeoutSeconds: number; pids: number };
  }[] = [
    {
      name: 'rust under default ceilings',
      policy: createPolicy(),
      template: 'rust',
      want: { timeoutSeconds: 30, pids: 128 },
    },
    {
      name: 'rust under generous ceilings',
      policy: policyWith({ ceilings: { timeoutSeconds: 600, pids: 1000 } }),
      template: 'rust',
      want: { timeoutSeconds: 120, pids: 256 },
    },
    {
      name: 'c under generous ceilings',
      policy: policyWith({ ceilings: { timeoutSeconds: 600 } }),
      template: 'c',
      want: { timeoutSeconds: 60, pids: 128 },
    },
    {
      name: 'c under a 45 s ceiling',
      policy: policyWith({ ceilings: { timeoutSeconds: 45 } }),
      template: 'c',
      want: { timeoutSeconds: 45, pids: 128 },
    },
    {
      name: 'python: ceilings are the defaults',
      policy: policyWith({ ceilings: { timeoutSeconds: 600 } }),
      template: 'python',
      want: { timeoutSeconds: 600, pids: 128 },
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const spec = ok({ template: c.template, code: 'x' }, c.policy);
      assert.equal(spec.limits.timeoutSeconds, c.want.timeoutSeconds);
      assert.equal(spec.limits.pids, c.want.pids);
    });
  }

  test('a template memory default is clamped too', () => {
    const template = { ...BUILTIN_TEMPLATES[0]!, defaults: { memoryBytes: 2048 * MiB } };
    const policy = policyWith({ templates: [template], ceilings: { memoryBytes: 256 * MiB } });
    assert.equal(ok(py(), policy).limits.memoryBytes, 256 * MiB);
    const roomy = policyWith({ templates: [template], ceilings: { memoryBytes: 4096 * MiB } });
    assert.equal(ok(py(), roomy).limits.memoryBytes, 2048 * MiB);
  });
});

describe('each ceiling', () => {
  const cases: { name: string; input: RunRequestInput; want: Violation }[] = [
    {
      name: 'cpu',
      input: py({ resources: { cpu: 2 } }),
      want: { field: 'resources.cpu', message: '2 is over the ceiling of 1', limit: '1', requested: '2' },
    },
    {
      name: 'cpu in millicores',
      input: py({ resources: { cpu: '1500m' } }),
      want: {
        field: 'resources.cpu',
        message: '1500m is over the ceiling of 1',
        limit: '1',
        requested: '1500m',
      },
    },
    {
      name: 'memory',
      input: py({ resources: { memory: '1g' } }),
      want: {
        field: 'resources.memory',
        message: '1Gi is over the ceiling of 512Mi',
        limit: '512Mi',
        requested: '1Gi',
      },
    },
    {
      name: 'memory one byte over',
      input: py({ resources: { memory: 512 * MiB + 1 } }),
      want: {
        field: 'resources.memory',
        message: `${512 * MiB + 1} is over the ceiling of 512Mi`,
        limit: '512Mi',
        requested: String(512 * MiB + 1),
      },
    },
    {
      name: 'pids',
      input: py({ resources: { pids: 129 } }),
      want: {
        field: 'resources.pids',
        message: '129 is over the ceiling of 128',
        limit: '128',
        requested: '129',
      },
    },
    {
      name: 'ephemeralStorage',
      input: py({ resources: { ephemeralStorage: '128Mi' } }),
      want: {
        field: 'resources.ephemeralStorage',
        message: '128Mi is over the ceiling of 64Mi',
        limit: '64Mi',
        requested: '128Mi',
      },
    },
    {
      name: 'timeoutSeconds',
      input: py({ timeoutSeconds: 31 }),
      want: {
        field: 'timeoutSeconds',
        message: '31s is over the ceiling of 30s',
        limit: '30s',
        requested: '31s',
      },
    },
  ];
  for (const c of cases) {
    test(`${c.name} over its ceiling: one violation naming field, limit and request`, () => {
      assert.deepEqual(denied(c.input), [c.want]);
    });
  }

  test('ceilings from the policy, not the defaults, are enforced', () => {
    const policy = policyWith({ ceilings: { cpuMilli: 4000, memoryBytes: 2048 * MiB, timeoutSeconds: 300 } });
    const spec = ok(py({ resources: { cpu: 3, memory: '2g' }, timeoutSeconds: 300 }), policy);
    assert.equal(spec.limits.cpuMilli, 3000);
    assert.equal(spec.limits.memoryBytes, 2048 * MiB);
    assert.equal(spec.limits.timeoutSeconds, 300);
    const tight = policyWith({ ceilings: { cpuMilli: 250 } });
    assert.deepEqual(denied(py({ resources: { cpu: '300m' } }), tight), [
      {
        field: 'resources.cpu',
        message: '300m is over the ceiling of 250m',
        limit: '250m',
        requested: '300m',
      },
    ]);
  });
});

describe('the image allowlist', () => {
  const cases: { image: string; allowlist: string[]; allowed: boolean }[] = [
    { image: 'python:3.11', allowlist: ['python:3.11'], allowed: true },
    { image: 'docker.io/library/python:3.11', allowlist: ['python:3.11'], allowed: true },
    { image: 'library/python:3.11', allowlist: ['python:3.11'], allowed: true },
    { image: 'python:3.11', allowlist: ['docker.io/library/python:3.11'], allowed: true },
    { image: 'python:3.12', allowlist: ['python:3.11'], allowed: false },
    { image: 'python', allowlist: ['python:latest'], allowed: true },
    { image: 'python', allowlist: ['python:3.11'], allowed: false },
    { image: 'sandpit/python:3.11', allowlist: ['sandpit/*'], allowed: true },
    { image: 'docker.io/sandpit/node:18', allowlist: ['sandpit/*'], allowed: true },
    { image: 'evil/python:3.11', allowlist: ['sandpit/*'], allowed: false },
    { image: 'sandpitx/python:3.11', allowlist: ['sandpit/*'], allowed: false },
    { image: 'registry.local:5000/team/app:1', allowlist: ['registry.local:5000/team/*'], allowed: true },
    { image: 'registry.local:5000/other/app:1', allowlist: ['registry.local:5000/team/*'], allowed: false },
    { image: 'ghcr.io/sandpit/python:3.11', allowlist: ['sandpit/*'], allowed: false },
  ];
  for (const c of cases) {
    test(`${c.image} with [${c.allowlist.join(', ')}]: ${c.allowed ? 'allowed' : 'denied'}`, () => {
      const policy = policyWith({ imageAllowlist: c.allowlist });
      const r = evaluate(RunRequestSchema.parse({ image: c.image, command: ['true'] }), policy);
      assert.equal(r.ok, c.allowed, JSON.stringify(r));
      if (!r.ok) {
        assert.deepEqual(r.violations, [
          {
            field: 'image',
            message: `image "${c.image}" is not in the allowlist`,
            limit: c.allowlist.join(', '),
          },
        ]);
      }
    });
  }

  test('a malformed image reference is its own violation', () => {
    for (const image of ['Python:3.11', 'python::3', 'a b', 'python:', '/python', 'python@sha256:abc']) {
      assert.deepEqual(
        denied({ image, command: ['true'] }),
        [{ field: 'image', message: `"${image}" is not a valid image reference` }],
        image,
      );
    }
  });

  test('the default allowlist: the templates’ images and python:3.11, nothing else', () => {
    assert.equal(ok({ image: 'python:3.11', command: ['python3'] }).image, 'python:3.11');
    assert.equal(ok({ image: 'sandpit/rust:1', command: ['rustc'] }).image, 'sandpit/rust:1');
    assert.equal(denied({ image: 'node:20', command: ['node'] })[0]!.field, 'image');
    assert.equal(denied({ image: 'ubuntu', command: ['sh'] })[0]!.field, 'image');
  });

  test('a digest-pinned image is allowed only when listed with its digest, or by prefix', () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    assert.equal(
      ok(
        { image: `python:3.11@${digest}`, command: ['x'] },
        policyWith({ imageAllowlist: [`python:3.11@${digest}`] }),
      ).image,
      `python:3.11@${digest}`,
    );
    assert.equal(
      denied(
        { image: `python:3.11@${digest}`, command: ['x'] },
        policyWith({ imageAllowlist: ['python:3.11'] }),
      )[0]!.field,
      'image',
    );
    assert.equal(
      ok({ image: `sandpit/python@${digest}`, command: ['x'] }, policyWith({ imageAllowlist: ['sandpit/*'] }))
        .image,
      `sandpit/python@${digest}`,
    );
  });

  test('the template image itself must be in the allowlist', () => {
    assert.deepEqual(denied(py(), policyWith({ imageAllowlist: ['python:3.11'] })), [
      {
        field: 'image',
        message: 'image "sandpit/python:3.11" is not in the allowlist',
        limit: 'python:3.11',
      },
    ]);
  });
});

describe('token scopes', () => {
  test('templates: allowed, and denied naming the scope', () => {
    assert.equal(ok(py(), createPolicy(), { templates: ['python', 'bash'] }).template, 'python');
    assert.deepEqual(
      denied({ template: 'node', code: 'x' }, createPolicy(), { templates: ['python', 'bash'] }),
      [
        {
          field: 'template',
          message: 'template "node" is not allowed for this token',
          limit: 'python, bash',
        },
      ],
    );
  });

  test('a template scope is checked against the resolved name, not the alias', () => {
    assert.equal(
      ok({ template: 'py', code: 'x' }, createPolicy(), { templates: ['python'] }).template,
      'python',
    );
    assert.equal(
      denied({ template: 'js', code: 'x' }, createPolicy(), { templates: ['python'] })[0]!.field,
      'template',
    );
  });

  test('images: narrowed within the allowlist', () => {
    const scope = { images: ['python:3.11'] };
    assert.equal(
      ok({ image: 'docker.io/library/python:3.11', command: ['x'] }, createPolicy(), scope).image,
      'python:3.11',
    );
    assert.deepEqual(denied(py(), createPolicy(), scope), [
      {
        field: 'image',
        message: 'image "sandpit/python:3.11" is not allowed for this token',
        limit: 'python:3.11',
      },
    ]);
  });

  test('an image scope cannot widen the allowlist', () => {
    const v = denied({ image: 'ubuntu:22.04', command: ['x'] }, createPolicy(), { images: ['ubuntu:22.04'] });
    assert.deepEqual(
      v.map((x) => x.message),
      ['image "ubuntu:22.04" is not in the allowlist'],
    );
  });

  test('templates restrict what runs: no run without one of them, and only their images', () => {
    const scope = { templates: ['python'] };
    // gcc in the c image, named by its image alone: the template scope is not bypassed.
    assert.deepEqual(
      denied({ image: 'sandpit/c:12', command: ['gcc', '--version'] }, createPolicy(), scope),
      [
        {
          field: 'template',
          message: 'this token runs only its templates: name one of them',
          limit: 'python',
        },
      ],
    );
    assert.deepEqual(denied(py({ image: 'sandpit/c:12' }), createPolicy(), scope), [
      {
        field: 'image',
        message: 'image "sandpit/c:12" is not allowed for this token',
        limit: 'sandpit/python:3.11',
      },
    ]);
    assert.equal(ok(py(), createPolicy(), scope).image, 'sandpit/python:3.11');
  });

  test('with templates, images widen what those templates may run, within the allowlist', () => {
    const scope = { templates: ['python'], images: ['python:3.11'] };
    assert.equal(ok(py({ image: 'python:3.11' }), createPolicy(), scope).image, 'python:3.11');
    assert.equal(ok(py(), createPolicy(), scope).image, 'sandpit/python:3.11');
    assert.equal(denied(py({ image: 'sandpit/c:12' }), createPolicy(), scope)[0]!.field, 'image');
    assert.equal(
      denied({ image: 'python:3.11', command: ['python3'] }, createPolicy(), scope)[0]!.field,
      'template',
    );
  });

  test('an empty scope list allows nothing', () => {
    assert.equal(denied(py(), createPolicy(), { templates: [] })[0]!.field, 'template');
    assert.equal(denied(py(), createPolicy(), { images: [] })[0]!.field, 'image');
  });
});

describe('runtimes', () => {
  test('runc and runsc are allowed by default', () => {
    assert.equal(ok(py({ runtime: 'runsc' })).runtime, 'runsc');
    assert.equal(ok(py({ runtime: 'runc' })).runtime, 'runc');
  });

  test('a runtime outside the allowed list is denied, naming the list', () => {
    assert.deepEqual(denied(py({ runtime: 'kata' })), [
      { field: 'runtime', message: 'runtime "kata" is not allowed', limit: 'runc, runsc' },
    ]);
  });

  test('with a configured default, only the default is allowed', () => {
    const policy = policyWith({ defaultRuntime: 'runsc' });
    assert.deepEqual(denied(py({ runtime: 'runc' }), policy), [
      { field: 'runtime', message: 'runtime "runc" is not allowed', limit: 'runsc' },
    ]);
  });

  test('an empty allowed list says the default only', () => {
    const policy = policyWith({ allowedRuntimes: [] });
    assert.deepEqual(denied(py({ runtime: 'runc' }), policy), [
      { field: 'runtime', message: 'runtime "runc" is not allowed', limit: '(the default only)' },
    ]);
    assert.equal(ok(py(), policy).runtime, undefined);
  });
});

describe('network', () => {
  test('egress none is allowed, explicit or implied', () => {
    assert.deepEqual(ok(py({ network: { egress: 'none' } })).network, { egress: 'none' });
    assert.deepEqual(ok(py({ network: {} })).network, { egress: 'none' });
    assert.deepEqual(ok(py()).network, { egress: 'none' });
  });

  test('an allowlist is denied while DISABLE_NETWORK is on (the default): see network.test.ts', () => {
    const v = denied(py({ network: { egress: 'allowlist' } }));
    assert.deepEqual(
      v.map((x) => x.field),
      ['network.egress'],
    );
    assert.match(v[0]!.message, /DISABLE_NETWORK/);
  });
});

describe('request size, counts and the workspace', () => {
  test('too many files', () => {
    const policy = policyWith({ ceilings: { files: 2 } });
    const files = ['a', 'b', 'c'].map((path) => ({ path, content: '' }));
    assert.deepEqual(denied(py({ files }), policy), [
      { field: 'files', message: '3 files is over the limit of 2', limit: 2 },
    ]);
    assert.equal(ok(py({ files: files.slice(0, 2) }), policy).files.length, 2);
  });

  test('too many environment variables', () => {
    const policy = policyWith({ ceilings: { envVars: 1 } });
    const env = [
      { name: 'A', value: '1' },
      { name: 'B', value: '2' },
    ];
    assert.deepEqual(denied(py({ env }), policy), [
      { field: 'env', message: '2 variables is over the limit of 1', limit: 1 },
    ]);
  });

  test('files larger than the workspace', () => {
    const policy = policyWith({ ceilings: { workspaceBytes: 1024, requestBytes: MiB } });
    const v = denied(py({ files: [{ path: 'big', content: 'x'.repeat(1025) }] }), policy);
    assert.deepEqual(v, [
      { field: 'files', message: 'files total 1025, more than the workspace holds (1Ki)', limit: '1Ki' },
    ]);
    assert.equal(
      ok(py({ files: [{ path: 'fits', content: 'x'.repeat(1024) }] }), policy).files[0]!.content.length,
      1024,
    );
  });

  test('files are measured against the workspace the request asked for', () => {
    const v = denied(
      py({ resources: { ephemeralStorage: 1024 }, files: [{ path: 'f', content: 'x'.repeat(2000) }] }),
    );
    assert.deepEqual(v, [
      { field: 'files', message: 'files total 2000, more than the workspace holds (1Ki)', limit: '1Ki' },
    ]);
  });

  test('base64 files are measured decoded', () => {
    const policy = policyWith({ ceilings: { workspaceBytes: 3 } });
    const content = Buffer.from('abc').toString('base64'); // 4 characters, 3 bytes
    assert.equal(
      ok(py({ files: [{ path: 'f', content, encoding: 'base64' }] }), policy).files[0]!.content.toString(),
      'abc',
    );
  });

  test('the request total counts code, files, stdin, argv and env', () => {
    // code 10 + file 10 + stdin 10 + argv ("ab"+1 + "cd"+1 = 6) + env ("K"+"vvv"+2 = 6) = 42
    const input = py({
      code: 'c'.repeat(10),
      files: [{ path: 'f', content: 'f'.repeat(10) }],
      stdin: 's'.repeat(10),
      command: ['ab', 'cd'],
      env: [{ name: 'K', value: 'vvv' }],
    });
    assert.equal(ok(input, policyWith({ ceilings: { requestBytes: 42 } })).argv.length, 2);
    assert.deepEqual(denied(input, policyWith({ ceilings: { requestBytes: 41 } })), [
      {
        field: 'request',
        message: 'code, files, stdin, argv and env total 42, over the limit of 41',
        limit: '41',
        requested: '42',
      },
    ]);
  });

  test('multi-byte characters count as bytes', () => {
    assert.equal(
      denied(py({ code: 'é'.repeat(6) }), policyWith({ ceilings: { requestBytes: 11 } }))[0]!.field,
      'request',
    );
    assert.equal(
      ok(py({ code: 'é'.repeat(6) }), policyWith({ ceilings: { requestBytes: 12 } })).code!.content.length,
      12,
    );
  });
});

describe('unknown template', () => {
  test('denied, naming every known template', () => {
    const v = denied({ template: 'cobol', code: 'x' });
    assert.deepEqual(v, [
      {
        field: 'template',
        message: 'unknown template "cobol"',
        limit: 'python, python-data, node, bash, c, rust',
      },
    ]);
  });

  test('with an image override, still denied', () => {
    assert.equal(denied({ template: 'cobol', image: 'python:3.11', code: 'x' })[0]!.field, 'template');
  });
});

describe('every violation at once', () => {
  test('one request breaking five rules gets five violations', () => {
    const v = denied(
      py({
        resources: { cpu: 4, memory: '4g', pids: 1000 },
        timeoutSeconds: 3600,
        network: { egress: 'allowlist' },
      }),
    );
    assert.deepEqual(v.map((x) => x.field).sort(), [
      'network.egress',
      'resources.cpu',
      'resources.memory',
      'resources.pids',
      'timeoutSeconds',
    ]);
  });

  test('every kind of rule broken together', () => {
    const policy = policyWith({
      ceilings: { files: 1, envVars: 1, requestBytes: 100, workspaceBytes: 64 * MiB },
    });
    const v = denied(
      {
        template: 'node',
        code: 'x'.repeat(60), // 60 + 40 + env 6 = 106 bytes
        files: [
          { path: 'a', content: 'x'.repeat(40) },
          { path: 'b', content: '' },
        ],
        env: [
          { name: 'A', value: '' },
          { name: 'B', value: '' },
        ],
        resources: { cpu: 2, memory: '1g', pids: 500, ephemeralStorage: '1g' },
        timeoutSeconds: 999,
        network: { egress: 'allowlist' },
        runtime: 'kata',
      },
      policy,
      { templates: ['python'] },
    );
    assert.deepEqual(v.map((x) => x.field).sort(), [
      'env',
      'files',
      'network.egress',
      'request',
      'resources.cpu',
      'resources.ephemeralStorage',
      'resources.memory',
      'resources.pids',
      'runtime',
      'template',
      'timeoutSeconds',
    ]);
  });

  test('an unknown template does not hide the other violations', () => {
    const v = denied({
      template: 'cobol',
      code: 'x',
      resources: { cpu: 8 },
      network: { egress: 'allowlist' },
    });
    assert.deepEqual(v.map((x) => x.field).sort(), ['network.egress', 'resources.cpu', 'template']);
  });

  test('a bad image does not hide the other violations', () => {
    const v = denied({ image: 'ubuntu', command: ['sh'], timeoutSeconds: 100, runtime: 'kata' });
    assert.deepEqual(v.map((x) => x.field).sort(), ['image', 'runtime', 'timeoutSeconds']);
  });
});

test('DEFAULT_CEILINGS are what the documentation says', () => {
  assert.deepEqual(DEFAULT_CEILINGS, {
    cpuMilli: 1000,
    memoryBytes: 512 * MiB,
    pids: 128,
    workspaceBytes: 64 * MiB,
    tmpBytes: 64 * MiB,
    timeoutSeconds: 30,
    outputBytes: MiB,
    requestBytes: 4 * MiB,
    downloadBytes: 64 * MiB,
    files: 256,
    envVars: 128,
    outputs: { maxFiles: 32, maxBytes: 16 * MiB, inlineImageBytes: MiB, inlineImages: 4 },
  });
});
