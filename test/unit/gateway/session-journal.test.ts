/**
 * The session journal: what a gateway remembers of its live sessions so that one found gone at
 * adoption is still audited with its principal, image and limits. It never holds a variable's
 * value, forgets a session when it ends, and skips what it cannot read.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { AuditRecordSchema } from '../../../src/api/audit.js';
import { createAuthenticator } from '../../../src/gateway/auth.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { fileJournal } from '../../../src/gateway/session-journal.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { memorySessions } from '../../support/memory-sessions.js';

const TOKEN = 'journal-token-0123456789';
const alice = createAuthenticator(
  { tokens: [{ name: 'alice', token: TOKEN }] },
  LOCAL_PRINCIPAL,
).authenticate(`Bearer ${TOKEN}`);

const newDir = () => mkdtempSync(join(tmpdir(), 'sandpit-journal-'));

describe('session journal', () => {
  test('a live session is remembered without its values, and forgotten when it ends', async () => {
    const dir = newDir();
    const { service } = memorySessions({ journal: fileJournal(dir, silentLogger()) });
    const session = await service.sessions.create(
      {
        template: 'python',
        env: [{ name: 'PLAIN', value: 'plain-value-1' }],
        secrets: [{ name: 'KEY', value: 'secret-value-2' }],
      },
      alice,
    );
    const files = readdirSync(dir);
    assert.deepEqual(files, [`${session.id}.json`]);
    const text = readFileSync(join(dir, files[0] ?? ''), 'utf8');
    assert.ok(!text.includes('plain-value-1') && !text.includes('secret-value-2'), text);
    const entry = JSON.parse(text) as { principalName: string; owner: string; spec: { image: string } };
    assert.equal(entry.principalName, 'alice');
    assert.equal(entry.owner, alice.id);
    assert.equal(entry.spec.image, session.image);
    await service.sessions.delete(session.id, alice);
    assert.deepEqual(readdirSync(dir), []);
  });

  test('a remembered session found gone at adoption is audited with its facts, and forgotten', async () => {
    const dir = newDir();
    const first = memorySessions({ journal: fileJournal(dir, silentLogger()) });
    const expired = await first.service.sessions.create({ template: 'python' }, alice);
    const vanished = await first.service.sessions.create({ template: 'python', ttlSeconds: 120 }, alice);
    // The gateway is killed: its sessions stay remembered. The next one finds the first expired
    // (its runner ended it at its TTL) and no trace at all of the second.
    const next = memorySessions({
      journal: fileJournal(dir, silentLogger()),
      adoption: {
        adopted: [],
        lost: [
          { sessionId: expired.id, principal: alice.id, reason: 'TTLExpired', message: 'its TTL ended it' },
        ],
      },
    });
    assert.deepEqual(await next.service.sessions.adopt(), { adopted: 0, lost: 2 });
    const records = next.records.map((r) => AuditRecordSchema.parse(r));
    const byId = new Map(records.map((r) => [(r as { sessionId?: string }).sessionId, r]));
    const e = byId.get(expired.id);
    assert.equal(e?.event, 'session.expired');
    assert.equal(e?.principal, 'alice');
    assert.equal(e?.image, expired.image);
    assert.deepEqual(e?.outcome, { phase: 'Expired', reason: 'TTLExpired' });
    const v = byId.get(vanished.id);
    assert.equal(v?.event, 'session.failed');
    assert.deepEqual(v?.outcome, { phase: 'Failed', reason: 'RunnerGone' });
    assert.equal((v as { limits?: { ttlSeconds: number } }).limits?.ttlSeconds, 120);
    assert.deepEqual(readdirSync(dir), [], 'both are forgotten');
  });

  test('an unreadable journal file is skipped, not trusted and not fatal', async () => {
    const dir = newDir();
    writeFileSync(join(dir, 'ses-bad.json'), '{"sessionId": "../../etc/passwd"}');
    writeFileSync(join(dir, 'ses-torn.json'), '{"sessionId": "ses-torn", "own');
    const { service, records } = memorySessions({ journal: fileJournal(dir, silentLogger()) });
    assert.deepEqual(await service.sessions.adopt(), { adopted: 0, lost: 0 });
    assert.deepEqual(records, []);
  });
});
