// The mount points of an unpacked root are made inside it, never through one of the image's links.
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  lacksMountPoints,
  makeMountPoints,
  MOUNT_POINTS,
} from '../../../../src/backends/oci/mount-points.js';

const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

/** A root to unpack into, and a folder beside it that stands for the host. */
async function rootAndHost(): Promise<{ root: string; host: string }> {
  const base = await mkdtemp(join(tmpdir(), 'sandpit-mount-points-'));
  dirs.push(base);
  const root = join(base, 'rootfs');
  const host = join(base, 'host');
  await mkdir(root);
  await mkdir(host);
  return { root, host };
}

test('an empty root gets every mount point: directories and empty files', async () => {
  const { root } = await rootAndHost();
  assert.equal(await lacksMountPoints(root), true);
  await makeMountPoints(root);
  for (const d of MOUNT_POINTS.dirs) assert.ok((await lstat(join(root, d))).isDirectory(), d);
  for (const f of MOUNT_POINTS.files) assert.equal(await readFile(join(root, f), 'utf8'), '', f);
  assert.equal(await lacksMountPoints(root), false);
});

test("the image's links where files go are replaced, never written through (dangling or not)", async () => {
  const { root, host } = await rootAndHost();
  await mkdir(join(root, 'etc'));
  await writeFile(join(host, 'hosts'), 'the host file\n');
  await symlink(join(host, 'resolv.conf'), join(root, 'etc/resolv.conf')); // dangling
  await symlink(join(host, 'hosts'), join(root, 'etc/hosts'));
  await writeFile(join(root, 'etc/hostname'), 'kept\n');
  assert.equal(await lacksMountPoints(root), true, 'a link is not a mount point');
  await makeMountPoints(root);
  assert.deepEqual(await readdir(host), ['hosts'], 'nothing was made on the host');
  assert.equal(await readFile(join(host, 'hosts'), 'utf8'), 'the host file\n');
  for (const f of ['etc/resolv.conf', 'etc/hosts']) {
    const stat = await lstat(join(root, f));
    assert.ok(stat.isFile() && stat.size === 0, `${f} is an empty file of the root's own`);
  }
  assert.equal(await readFile(join(root, 'etc/hostname'), 'utf8'), 'kept\n', 'a real file is left as it is');
});

test('a link where a directory goes is refused, naming it, and nothing is made through it', async () => {
  const { root, host } = await rootAndHost();
  await symlink(host, join(root, 'etc'));
  await assert.rejects(makeMountPoints(root), {
    code: 'BACKEND_ERROR',
    message: /a symbolic link at \/etc, where the oci backend needs a directory/,
  });
  assert.deepEqual(await readdir(host), []);
  const other = await rootAndHost();
  await symlink(other.host, join(other.root, 'tmp'));
  await assert.rejects(makeMountPoints(other.root), { message: /a symbolic link at \/tmp/ });
  assert.deepEqual(await readdir(other.host), []);
});
