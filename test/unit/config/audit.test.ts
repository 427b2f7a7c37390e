import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditFileFor, defaultAuditFile } from '../../../src/config/audit.js';
import { loadConfig } from '../../../src/config/load.js';

describe('where the audit file is', () => {
  test('default: $XDG_STATE_HOME/sandpit/audit.jsonl, else ~/.local/state/sandpit/audit.jsonl', () => {
    assert.equal(
      defaultAuditFile({ XDG_STATE_HOME: '/srv/state', HOME: '/home/u' }),
      '/srv/state/sandpit/audit.jsonl',
    );
    assert.equal(defaultAuditFile({ HOME: '/home/u' }), '/home/u/.local/state/sandpit/audit.jsonl');
    assert.equal(
      defaultAuditFile({ XDG_STATE_HOME: 'relative/state', HOME: '/home/u' }),
      '/home/u/.local/state/sandpit/audit.jsonl',
      'a relative XDG_STATE_HOME is ignored (XDG spec)',
    );
  });

  test('the gateway writes the default unless audit.file names one; the operator only when it does', () => {
    const env = { HOME: '/home/u' };
    const defaults = loadConfig({ env: {} });
    assert.deepEqual(auditFileFor(defaults, env, 'gateway'), {
      path: '/home/u/.local/state/sandpit/audit.jsonl',
      maxBytes: 100 * 1024 ** 2,
      maxFiles: 5,
      flushIntervalMs: 100,
    });
    assert.equal(auditFileFor(defaults, env, 'operator'), undefined);
    const named = loadConfig({ env: { SANDPIT_AUDIT_FILE: '/var/log/sandpit/audit.jsonl' } });
    assert.equal(auditFileFor(named, env, 'operator')?.path, '/var/log/sandpit/audit.jsonl');
    assert.equal(auditFileFor(named, env, 'gateway')?.path, '/var/log/sandpit/audit.jsonl');
  });

  test('a relative audit.file is taken from the working directory', () => {
    const c = loadConfig({ env: { SANDPIT_AUDIT_FILE: 'audit.jsonl' } });
    assert.equal(auditFileFor(c, {}, 'gateway')?.path, `${process.cwd()}/audit.jsonl`);
  });

  test('audit.enabled false: no file for either', () => {
    const c = loadConfig({ env: { SANDPIT_AUDIT_ENABLED: 'false', SANDPIT_AUDIT_FILE: '/x/audit.jsonl' } });
    assert.equal(auditFileFor(c, {}, 'gateway'), undefined);
    assert.equal(auditFileFor(c, {}, 'operator'), undefined);
  });
});
