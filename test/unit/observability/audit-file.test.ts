/**
 * The audit file on real filesystems: batches written within the flush interval, nothing lost on
 * close, rotation at a small size with several writers, and real ENOSPC and EROFS (a tmpfs of our
 * own) reported, retried, and recovered from with every line written exactly once.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  AuditFile,
  type AuditFileEvents,
  type AuditFileOptions,
} from '../../../src/observability/audit-file.js';
import { pollUntil } from '../../../src/shared/time.js';
import { fill, mountTmpfs, type Tmpfs } from '../../support/tmpfs.js';

const dir = mkdtempSync(join(tmpdir(), 'sandpit-audit-file-'));
const mounts: Tmpfs[] = [];
after(() => {
  for (const m of mounts) m.unmount();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
const fresh = (name = 'audit.jsonl'): string => join(dir, `case-${n++}`, name);

function recorder(): AuditFileEvents & { writes: number[]; failures: string[]; recoveries: number } {
  const r = {
    writes: [] as number[],
    failures: [] as string[],
    recoveries: 0,
    written: (lines: number) => void r.writes.push(lines),
    failed: (e: NodeJS.ErrnoException) => void r.failures.push(e.code ?? '?'),
    recovered: () => void r.recoveries++,
  };
  return r;
}

function make(path: string, options: Partial<AuditFileOptions> = {}) {
  const events = recorder();
  const file = new AuditFile(
    { path, maxBytes: 100 * 1024 ** 2, maxFiles: 5, flushIntervalMs: 100, retryIntervalMs: 50, ...options },
    events,
  );
  return { file, events };
}

const lines = (path: string): string[] =>
  existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean) : [];
const line = (i: number, pad = 0): string => JSON.stringify({ i, pad: 'p'.repeat(pad) });

describe('batches', () => {
  test('lines appended within one interval land in one fsynced write, no later than the interval', async () => {
    const path = fresh();
    const { file, events } = make(path);
    await file.open();
    const t0 = performance.now();
    const seen: { at: number; count: number }[] = [];
    for (let i = 0; i < 5; i++) {
      file.append(line(i));
      await new Promise((r) => setTimeout(r, 10));
    }
    await pollUntil(
      () => {
        const count = lines(path).length;
        if (count !== (seen.at(-1)?.count ?? 0)) seen.push({ at: performance.now() - t0, count });
        return count === 5;
      },
      { intervalMs: 2, timeoutMs: 5000 },
    );
    assert.equal(seen.length, 1, `one step from 0 to 5 lines: ${JSON.stringify(seen)}`);
    const at = seen[0]!.at;
    assert.ok(at >= 90, `written as a batch after the interval, not line by line (${at.toFixed(1)} ms)`);
    assert.ok(at < 100 + 400, `written within the interval plus one write and fsync (${at.toFixed(1)} ms)`);
    await file.flush(); // the commit that wrote them has fsynced by now
    assert.deepEqual(events.writes, [5], 'one commit of five lines');
    await file.close();
  });

  test('close writes every line still waiting, however long the interval', async () => {
    const path = fresh();
    const { file } = make(path, { flushIntervalMs: 1000 });
    await file.open();
    for (let i = 0; i < 3; i++) file.append(line(i));
    assert.equal(lines(path).length, 0, 'still in the batch');
    await file.close();
    assert.deepEqual(lines(path), [line(0), line(1), line(2)]);
    assert.deepEqual(file.pending, []);
  });

  test('the file is created with its directory, private to its owner', async () => {
    const path = fresh('nested/deeper/audit.jsonl');
    const { file } = make(path);
    await file.open();
    await file.close();
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(join(path, '..')).mode & 0o777, 0o700);
  });
});

describe('rotation', () => {
  test('at maxBytes (1 KiB here) the file moves to .1, and so on up; maxFiles are kept, the oldest dropped', async () => {
    const path = fresh();
    const { file } = make(path, { maxBytes: 1024, maxFiles: 2 });
    await file.open();
    const all = Array.from({ length: 40 }, (_, i) => line(i, 150));
    for (const [i, l] of all.entries()) {
      file.append(l);
      if (i % 3 === 2) await file.flush();
    }
    await file.close();
    const names = readdirSync(join(path, '..')).sort();
    assert.deepEqual(names, ['audit.jsonl', 'audit.jsonl.1', 'audit.jsonl.2']);
    for (const name of names)
      assert.ok(statSync(join(path, '..', name)).size <= 1024, `${name} within 1 KiB`);
    const kept = [...lines(`${path}.2`), ...lines(`${path}.1`), ...lines(path)];
    assert.ok(kept.length >= 6, `three files' worth of lines kept (${kept.length})`);
    assert.deepEqual(kept, all.slice(-kept.length), 'the newest lines, in order, none missing between files');
  });

  test('a line bigger than maxBytes gets a file of its own', async () => {
    const path = fresh();
    const { file } = make(path, { maxBytes: 1024, maxFiles: 3 });
    await file.open();
    file.append(line(0));
    file.append(line(1, 2000));
    file.append(line(2));
    await file.close();
    assert.deepEqual(lines(`${path}.2`), [line(0)]);
    assert.deepEqual(lines(`${path}.1`), [line(1, 2000)]);
    assert.deepEqual(lines(path), [line(2)]);
  });

  test('two writers on one file rotate it without losing or repeating a line', async () => {
    const path = fresh();
    const a = make(path, { maxBytes: 1024, maxFiles: 100 });
    const b = make(path, { maxBytes: 1024, maxFiles: 100 });
    await Promise.all([a.file.open(), b.file.open()]);
    const written: string[] = [];
    for (let round = 0; round < 30; round++) {
      for (const [w, name] of [
        [a, 'a'],
        [b, 'b'],
      ] as const) {
        const l = JSON.stringify({ w: name, round, pad: 'q'.repeat(120) });
        w.file.append(l);
        written.push(l);
      }
      await Promise.all([a.file.flush(), b.file.flush()]);
    }
    await Promise.all([a.file.close(), b.file.close()]);
    const files = readdirSync(join(path, '..')).filter((f) => f.startsWith('audit.jsonl'));
    assert.ok(files.length > 5, `it rotated (${files.join(' ')})`);
    assert.ok(!files.includes('audit.jsonl.lock'), 'no lock left behind');
    const found = files.flatMap((f) => lines(join(path, '..', f)));
    assert.deepEqual([...found].sort(), [...written].sort());
  });
});

describe('a filesystem that fails', () => {
  test('ENOSPC: reported and retried; once there is room the waiting lines are written exactly once', async () => {
    const fs = mountTmpfs(64);
    mounts.push(fs);
    const path = join(fs.dir, 'audit.jsonl');
    const { file, events } = make(path);
    await file.open();
    file.append(line(0));
    await file.flush();
    const filler = fill(fs.dir);
    // Bigger than what is left of the file's last page: a short write, then ENOSPC.
    const big = line(1, 6000);
    file.append(big);
    file.append(line(2));
    await file.flush();
    assert.equal(file.failure?.code, 'ENOSPC');
    assert.deepEqual(file.pending, [big, line(2)], 'both lines kept (the first perhaps in part)');
    assert.ok(events.failures.includes('ENOSPC'));
    assert.ok(
      await pollUntil(() => events.failures.length >= 2, { intervalMs: 10, timeoutMs: 5000 }),
      'retried',
    );
    unlinkSync(filler);
    assert.ok(
      await pollUntil(() => file.failure === undefined, { intervalMs: 10, timeoutMs: 5000 }),
      'recovered once there was room',
    );
    assert.equal(events.recoveries, 1);
    assert.deepEqual(lines(path), [line(0), big, line(2)]);
    file.append(line(3));
    await file.close();
    assert.deepEqual(lines(path), [line(0), big, line(2), line(3)]);
  });

  test('EROFS: a file that cannot be opened fails until the filesystem is writable again', async () => {
    const fs = mountTmpfs(64, { readOnly: true });
    mounts.push(fs);
    const path = join(fs.dir, 'state', 'audit.jsonl');
    const { file, events } = make(path);
    await file.open();
    assert.equal(file.failure?.code, 'EROFS');
    file.append(line(0));
    fs.readOnly(false);
    assert.ok(await pollUntil(() => file.failure === undefined, { intervalMs: 10, timeoutMs: 5000 }));
    assert.ok(events.recoveries >= 1);
    await file.close();
    assert.deepEqual(lines(path), [line(0)]);
  });

  test('a file removed behind the writer’s back is created again', async () => {
    const path = fresh();
    const { file } = make(path);
    await file.open();
    file.append(line(0));
    await file.flush();
    unlinkSync(path);
    file.append(line(1));
    await file.close();
    assert.deepEqual(lines(path), [line(1)]);
  });
});
