/** The store of output files of runs on one machine (Docker, oci): on disk, bounded, oldest first, per process. */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { currentOwner } from '../../../src/backends/docker/owner.js';
import { RunFileStore } from '../../../src/backends/run-file-store.js';

const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

async function base(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'sandpit-store-test-'));
  dirs.push(d);
  return d;
}

const file = (path: string, bytes: number) => ({ path, data: Buffer.alloc(bytes, path.charCodeAt(0)) });
const me = currentOwner();
const folderOf = (owner: string) => Buffer.from(owner).toString('hex');

describe('RunFileStore', () => {
  test('keeps files under names of its own, reads them back by path for their owner only', async () => {
    const dir = await base();
    const store = new RunFileStore({ dir, maxBytes: 100, processOwner: me });
    store.save('run-1', 'alice', [file('../../evil', 3), file('a/b.txt', 2)]);
    assert.deepEqual(
      await store.read('run-1', 'a/b.txt', 'alice'),
      Buffer.from('aa'),
      'readable before it is written',
    );
    await store.written();
    assert.deepEqual(await readdir(join(dir, folderOf(me), 'run-1')), ['0', '1']);
    assert.deepEqual(await store.read('run-1', 'a/b.txt', 'alice'), Buffer.from('aa'));
    assert.deepEqual(await store.read('run-1', '../../evil', 'alice'), Buffer.from('...'));
    await assert.rejects(store.read('run-1', 'a/b.txt', 'bob'), { code: 'NOT_FOUND' });
    await assert.rejects(store.read('run-1', 'nope', 'alice'), { code: 'NOT_FOUND' });
    await assert.rejects(store.read('run-2', 'a/b.txt', 'alice'), { code: 'NOT_FOUND' });
    await store.close();
  });

  test('past its cap the oldest runs go first, and reading theirs says why; release frees a run', async () => {
    const store = new RunFileStore({ dir: await base(), maxBytes: 10, processOwner: me });
    store.save('old', 'o', [file('x', 4)]);
    store.save('mid', 'o', [file('y', 4)]);
    store.save('new', 'o', [file('z', 4)]);
    assert.equal(store.bytes, 8);
    await assert.rejects(store.read('old', 'x', 'o'), {
      code: 'NOT_FOUND',
      hint: /removed to keep the store within its cap/,
    });
    assert.equal((await store.read('mid', 'y', 'o')).length, 4);
    store.release('mid');
    assert.equal(store.bytes, 4);
    await assert.rejects(store.read('mid', 'y', 'o'), { code: 'NOT_FOUND', hint: /listed in its result/ });
    assert.throws(() => store.save('huge', 'o', [file('h', 11)]), { code: 'TOO_LARGE' });
    await store.close();
  });

  test('keep(): files the store cannot take come back named as not kept, with why, and it says so', async () => {
    const told: string[] = [];
    const store = new RunFileStore({
      dir: await base(),
      maxBytes: 10,
      processOwner: me,
      onError: (runId, message) => told.push(`${runId}: ${message}`),
    });
    const fits = { files: [file('a.png', 4)], skipped: [] };
    assert.equal(store.keep('r1', 'o', fits), fits);
    assert.equal((await store.runFiles.read('r1', 'a.png', { id: 'o' })).length, 4);
    const kept = store.keep('r2', 'o', { files: [file('big.csv', 11)], skipped: [] });
    assert.deepEqual(kept?.files, []);
    assert.equal(kept?.skipped[0]?.entry, 'big.csv');
    assert.equal(kept?.skipped[0]?.reason, 'Unreadable');
    assert.match(kept?.skipped[0]?.message ?? '', /could not keep it: .*exceed the store's cap/);
    assert.match(told.join('\n'), /^r2: could not keep them/);
    store.runFiles.release('r1');
    assert.equal(store.bytes, 0);
    await store.close();
  });

  test('the folders of dead processes go when a store opens; close removes its own', async () => {
    const dir = await base();
    const dead = `${(await import('node:os')).hostname()}:999999999:1`;
    await mkdir(join(dir, folderOf(dead)), { recursive: true });
    await writeFile(join(dir, folderOf(dead), 'f'), 'x');
    const store = new RunFileStore({ dir, maxBytes: 10, processOwner: me });
    store.save('r', 'o', [file('a', 1)]);
    await store.written();
    const names = await readdir(dir);
    assert.ok(!names.includes(folderOf(dead)), 'the dead process’s folder is gone');
    assert.ok(names.includes(folderOf(me)));
    await store.close();
    assert.ok(!(await readdir(dir)).includes(folderOf(me)));
  });

  test('without a dir it keeps files in a temporary folder of its own, removed on close', async () => {
    const store = new RunFileStore({ maxBytes: 10, processOwner: me });
    store.save('r', 'o', [file('a', 1)]);
    await store.written();
    assert.deepEqual(await store.read('r', 'a', 'o'), Buffer.from('a'));
    await store.close();
  });

  test('a run whose files cannot be written says so when read', async () => {
    const dir = await base();
    await writeFile(join(dir, 'blocker'), 'x');
    const store = new RunFileStore({ dir: join(dir, 'blocker'), maxBytes: 10, processOwner: me });
    store.save('r', 'o', [file('a', 1)]);
    await store.written();
    await assert.rejects(store.read('r', 'a', 'o'), { code: 'NOT_FOUND', message: /could not be kept/ });
    await store.close();
  });
});
