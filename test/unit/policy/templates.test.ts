import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  BUILTIN_TEMPLATES,
  CODE_DIR,
  findTemplate,
  templateForFile,
  WORKSPACE,
} from '../../../src/policy/templates.js';

describe('findTemplate', () => {
  const cases: [string, string | undefined][] = [
    ['python', 'python'],
    ['python3', 'python'],
    ['py', 'python'],
    ['PYTHON', 'python'],
    ['Py', 'python'],
    ['node', 'node'],
    ['javascript', 'node'],
    ['js', 'node'],
    ['nodejs', 'node'],
    ['bash', 'bash'],
    ['sh', 'bash'],
    ['shell', 'bash'],
    ['c', 'c'],
    ['gcc', 'c'],
    ['rust', 'rust'],
    ['rs', 'rust'],
    ['rustc', 'rust'],
    ['cargo', 'rust'],
    ['cobol', undefined],
    ['', undefined],
    ['pythonx', undefined],
    ['c++', undefined],
  ];
  for (const [key, want] of cases) {
    test(`${JSON.stringify(key)} → ${want ?? 'none'}`, () => {
      assert.equal(findTemplate(BUILTIN_TEMPLATES, key)?.name, want);
    });
  }
});

describe('templateForFile', () => {
  const cases: [string, string | undefined][] = [
    ['app.py', 'python'],
    ['APP.PY', 'python'],
    ['dir.v2/app.py', 'python'],
    ['main.js', 'node'],
    ['main.mjs', 'node'],
    ['main.cjs', 'node'],
    ['run.sh', 'bash'],
    ['run.bash', 'bash'],
    ['hello.c', 'c'],
    ['main.rs', 'rust'],
    ['archive.tar.gz', undefined],
    ['Makefile', undefined],
    ['main.cpp', undefined],
    ['app.py.txt', undefined],
    ['.py', 'python'],
    ['noext.', undefined],
  ];
  for (const [file, want] of cases) {
    test(`${file} → ${want ?? 'none'}`, () => {
      assert.equal(templateForFile(BUILTIN_TEMPLATES, file)?.name, want);
    });
  }
});

describe('the built-in templates', () => {
  test('names, images and code files', () => {
    assert.deepEqual(
      BUILTIN_TEMPLATES.map((t) => [t.name, t.image, t.fileName]),
      [
        ['python', 'sandpit/python:3.11', 'main.py'],
        ['python-data', 'sandpit/python-data:3.11', 'main.py'],
        ['node', 'sandpit/node:18', 'main.js'],
        ['bash', 'sandpit/bash:5', 'main.sh'],
        ['c', 'sandpit/c:12', 'main.c'],
        ['rust', 'sandpit/rust:1', 'main.rs'],
      ],
    );
  });

  test('python-data alone collects by default: the top-level images', () => {
    assert.deepEqual(
      BUILTIN_TEMPLATES.filter((t) => t.outputs.length > 0).map((t) => [t.name, t.outputs]),
      [['python-data', ['*.png', '*.jpg', '*.svg']]],
    );
  });

  test('every command runs the code file under CODE_DIR', () => {
    for (const t of BUILTIN_TEMPLATES) {
      assert.ok(
        t.command.some((a) => a.includes(`${CODE_DIR}/${t.fileName}`)),
        `${t.name}: ${t.command.join(' ')}`,
      );
    }
  });

  test('no alias or extension belongs to two templates, and no alias is another template’s name', () => {
    const names = BUILTIN_TEMPLATES.map((t) => t.name);
    const aliases = BUILTIN_TEMPLATES.flatMap((t) => t.aliases);
    const exts = BUILTIN_TEMPLATES.flatMap((t) => t.extensions);
    assert.equal(new Set([...names, ...aliases]).size, names.length + aliases.length);
    assert.equal(new Set(exts).size, exts.length);
    for (const a of aliases) assert.equal(a, a.toLowerCase());
  });

  test('compiled templates pass program arguments through as "$@" and build into /tmp', () => {
    for (const name of ['c', 'rust']) {
      const t = findTemplate(BUILTIN_TEMPLATES, name)!;
      assert.equal(t.command[0], '/bin/sh');
      assert.equal(t.command[1], '-c');
      assert.match(t.command[2]!, /&& exec \/tmp\/main "\$@"$/);
      assert.equal(t.command[3], 'main');
    }
    assert.match(findTemplate(BUILTIN_TEMPLATES, 'c')!.command[2]!, new RegExp(`-I${WORKSPACE} `));
  });

  test('template defaults', () => {
    assert.deepEqual(findTemplate(BUILTIN_TEMPLATES, 'c')!.defaults, { timeoutSeconds: 60 });
    assert.deepEqual(findTemplate(BUILTIN_TEMPLATES, 'rust')!.defaults, { timeoutSeconds: 120, pids: 256 });
    assert.deepEqual(findTemplate(BUILTIN_TEMPLATES, 'python')!.defaults, {});
    assert.equal(findTemplate(BUILTIN_TEMPLATES, 'rust')!.env.CARGO_NET_OFFLINE, 'true');
  });
});
