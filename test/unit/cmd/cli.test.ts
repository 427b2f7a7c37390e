// The `sandpit` command where it needs no engine: argument and config errors, --version, `config`.
// Each case spawns the real CLI (through tsx), so exit codes and stderr are what a user sees.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** Runs the CLI with only PATH and HOME from this process, plus `env`. */
export function sandpit(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cmd/cli.ts'), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

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
