// The `sandpit` command where it needs no engine: argument and config errors, --version, `config`.
// Each case spawns the real CLI (built), so exit codes and stderr are what a user sees.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { configFields } from '../../../src/config/load.js';
import { sandpit } from '../../support/cli.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

describe('--log-level is validated like the setting it sets', () => {
  for (const command of ['mcp', 'serve', 'operator']) {
    test(`sandpit ${command} --log-level loud: exit 78, naming the flag and the accepted levels`, () => {
      const r = sandpit([command, '--log-level', 'loud']);
      assert.equal(r.code, 78, r.stderr);
      assert.match(
        r.stderr,
        /logging\.level \(from flag --log-level = "loud"\): expected one of fatal, error, warn, info, debug, trace, silent/,
      );
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    });
  }

  test('the environment route gives the same error', () => {
    const r = sandpit(['mcp'], { SANDPIT_LOGGING_LEVEL: 'loud' });
    assert.equal(r.code, 78);
    assert.match(
      r.stderr,
      /logging\.level \(from env SANDPIT_LOGGING_LEVEL = "loud"\): expected one of fatal/,
    );
  });
});

describe('--version', () => {
  const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string })
    .version;
  for (const flag of ['-V', '--version', 'version']) {
    test(`sandpit ${flag} prints the version`, () => {
      const r = sandpit([flag]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `sandpit ${version}\n`);
    });
  }
});

describe('sandpit config', () => {
  const TOKEN = 'env-token-0123456789';
  const FILE_TOKEN = 'file-token-abcdefghij';
  const SCOPED = 'scoped-token-klmnopqrs';
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-config-cmd-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'sandpit.yaml');
  writeFileSync(file, `auth:\n  token: ${FILE_TOKEN}\nsandbox:\n  maxMemory: 256Mi\n`);
  const env = {
    MCP_AUTH_TOKEN: TOKEN,
    SANDPIT_AUTH_TOKENS: JSON.stringify([{ name: 'ci', token: SCOPED, templates: ['python'] }]),
    CONTAINER_TIMEOUT_SECONDS: '45',
  };

  test('lists every setting with its env variables, default, value and source; secrets print as <set>', () => {
    const r = sandpit(['config', '--config', file], env);
    assert.equal(r.code, 0, r.stderr);
    for (const secret of [TOKEN, FILE_TOKEN, SCOPED])
      assert.ok(!r.stdout.includes(secret), 'no token in the output');
    const lines = r.stdout.split('\n');
    const row = (field: string): string => lines.find((l) => l.startsWith(`${field} `)) ?? '';
    for (const field of configFields()) assert.ok(row(field), `${field} is listed`);
    assert.match(row('auth.token'), /SANDPIT_AUTH_TOKEN, MCP_AUTH_TOKEN\s+-\s+<set>\s+env MCP_AUTH_TOKEN$/);
    assert.match(row('auth.tokens'), /"token":"<set>"/);
    assert.match(row('sandbox.maxMemory'), /512Mi\s+256Mi\s+file .*sandpit\.yaml$/);
    assert.match(
      row('sandbox.timeoutSeconds'),
      /CONTAINER_TIMEOUT_SECONDS\s+30\s+45\s+env CONTAINER_TIMEOUT_SECONDS$/,
    );
    assert.match(row('server.port'), /8080\s+8080\s+default$/);
  });

  test('--json gives the same settings as data, secrets hidden', () => {
    const r = sandpit(['config', '--json', '--config', file], env);
    assert.equal(r.code, 0, r.stderr);
    for (const secret of [TOKEN, FILE_TOKEN, SCOPED]) assert.ok(!r.stdout.includes(secret));
    const settings = JSON.parse(r.stdout) as {
      field: string;
      env: string[];
      value: string;
      source: string;
    }[];
    assert.deepEqual(
      settings.map((s) => s.field),
      configFields(),
    );
    assert.deepEqual(
      settings.find((s) => s.field === 'auth.token'),
      {
        field: 'auth.token',
        env: ['SANDPIT_AUTH_TOKEN', 'MCP_AUTH_TOKEN'],
        default: '-',
        value: '<set>',
        source: 'env MCP_AUTH_TOKEN',
      },
    );
  });

  test('a config error points at `sandpit config`, which lists every setting', () => {
    const r = sandpit(['mcp'], { MAX_CONTAINER_MEMORY: 'lots' });
    assert.equal(r.code, 78);
    assert.match(r.stderr, /hint: .*`sandpit config` lists every setting/);
  });
});
