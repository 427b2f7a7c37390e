/**
 * A `sandpit serve` killed with SIGKILL while it holds sessions, then started again with the same
 * instance id, on the real engine: the live session is adopted (the same id and files, and the
 * next exec works, under its principal's name), and the one whose sandbox died meanwhile is
 * removed with an audit record that still names its principal, image and limits.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AuditRecordSchema, type AuditRecord } from '../../src/api/audit.js';
import { SESSION_NAME_PREFIX } from '../../src/backends/docker/session/docker-sessions.js';
import { requireDocker } from '../support/docker.js';
import { ensureBuilt, startServe, tempDir, type Served } from './helpers.js';

const TOKEN = 'restart-token-0123456789';
const auth = { Authorization: `Bearer ${TOKEN}` };
const JSON_TYPE = { 'Content-Type': 'application/json' };

let docker: Awaited<ReturnType<typeof requireDocker>>;
let state: string;
let config: object;
let served: Served | undefined;
before(async () => {
  ensureBuilt();
  docker = await requireDocker();
  state = tempDir('restart-state');
  config = {
    auth: { tokens: [{ name: 'alice', token: TOKEN }] },
    server: { instanceId: `e2e-restart-${process.pid}` },
    audit: { file: join(state, 'audit.jsonl'), flushIntervalMs: 0 },
    logging: { level: 'warn' },
  };
  served = await startServe(config, [], { XDG_STATE_HOME: state });
});
after(() => served?.stop());

async function rest(method: string, path: string, body?: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${served?.url}${path}`, { method, headers: { ...auth, ...headers }, body });
  const text = await res.text();
  return {
    status: res.status,
    text,
    json: (text.startsWith('{') ? JSON.parse(text) : {}) as Record<string, unknown>,
  };
}

/** The first value `f` gives within 10 s (undefined when it gives none). */
async function until<T>(f: () => T | undefined): Promise<T | undefined> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const v = f();
    if (v !== undefined || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const audit = (): AuditRecord[] =>
  readFileSync(join(state, 'audit.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => AuditRecordSchema.parse(JSON.parse(line)));

describe(
  'a SIGKILLed gateway restarted with the same instance id (real engine)',
  { timeout: 240_000 },
  () => {
    test('adopts the live session and audits the one that died meanwhile', async () => {
      const created = await Promise.all(
        ['kept', 'dies'].map(async () => {
          const r = await rest('POST', '/sessions', '{"template":"python","ttlSeconds":900}', JSON_TYPE);
          assert.equal(r.status, 201, r.text);
          return r.json.id as string;
        }),
      );
      const [kept, dies] = created as [string, string];
      assert.equal((await rest('PUT', `/sessions/${kept}/files/note.txt`, 'still here')).status, 201);

      process.kill(served?.pid ?? 0, 'SIGKILL');
      await served?.stop();
      served = undefined;
      const [victim] = await docker.listContainers({
        all: true,
        filters: { name: [`${SESSION_NAME_PREFIX}${dies}`] },
      });
      assert.ok(victim, 'the session container is there after the gateway died');
      await docker.getContainer(victim.Id).kill();

      served = await startServe(config, [], { XDG_STATE_HOME: state });
      const note = await rest('GET', `/sessions/${kept}/files/note.txt`);
      assert.equal(note.status, 200, note.text);
      assert.equal(note.text, 'still here');
      const exec = await rest('POST', `/sessions/${kept}/exec`, '{"command":["cat","note.txt"]}', JSON_TYPE);
      assert.equal(exec.json.exitCode, 0, exec.text);
      assert.equal(exec.json.stdout, 'still here');
      assert.equal((await rest('GET', `/sessions/${dies}`)).status, 404);

      const records = audit();
      const ended = records.find(
        (r) => r.event !== 'session.created' && 'sessionId' in r && r.sessionId === dies,
      );
      assert.ok(ended, `no end record for ${dies}: ${JSON.stringify(records.map((r) => r.event))}`);
      assert.equal(ended.event, 'session.failed');
      assert.equal(ended.principal, 'alice');
      assert.ok(ended.image.length > 0);
      // The exec's record is written once its result is sent: wait for it.
      const execRecord = await until(() => audit().find((r) => r.event === 'exec' && r.sessionId === kept));
      assert.equal(execRecord?.principal, 'alice', 'the adopted session keeps its principal’s name');
      const containers = await docker.listContainers({
        all: true,
        filters: { name: [`${SESSION_NAME_PREFIX}${dies}`] },
      });
      assert.deepEqual(containers, [], 'the dead session’s container is removed');
      assert.equal((await rest('DELETE', `/sessions/${kept}`)).status, 200);
    });
  },
);
