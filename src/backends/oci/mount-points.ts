/**
 * The mount points an unpacked root must have, because the runtime mounts over them and the root
 * cannot be written once shared. They are made inside the root without ever following one of the
 * image's symbolic links: a link could point anywhere on the host, and this runs as root.
 */
import { lstat, mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { EGRESS_SOCKET_DIR } from '../../runner/protocol.js';
import { AppError } from '../../shared/errors.js';

export const MOUNT_POINTS = {
  dirs: ['proc', 'sys', 'dev', 'tmp', 'workspace', EGRESS_SOCKET_DIR.slice(1)],
  files: ['etc/resolv.conf', 'etc/hostname', 'etc/hosts'],
};

/** Whether a mount point is missing, or is one of the image's links (to be replaced by the real thing). */
export async function lacksMountPoints(root: string): Promise<boolean> {
  for (const [paths, dir] of [
    [MOUNT_POINTS.dirs, true],
    [MOUNT_POINTS.files, false],
  ] as const) {
    for (const p of paths) {
      const stat = await lstat(join(root, p)).catch(() => undefined);
      if (!stat || (dir ? !stat.isDirectory() : !stat.isFile())) return true;
    }
  }
  return false;
}

/** Creates the mount points `root` lacks; an image's link where a file goes is replaced by a file. */
export async function makeMountPoints(root: string): Promise<void> {
  for (const d of MOUNT_POINTS.dirs) await mkdirInRoot(root, d);
  for (const f of MOUNT_POINTS.files) await fileInRoot(root, f);
}

/** Makes the directory `relative` inside `root`, one component at a time, refusing to follow a link. */
async function mkdirInRoot(root: string, relative: string): Promise<void> {
  let path = root;
  for (const part of relative.split('/')) {
    path = join(path, part);
    const stat = await lstat(path).catch(() => undefined);
    if (!stat) await mkdir(path, { mode: 0o755 });
    else if (!stat.isDirectory()) throw notThere(root, path, stat.isSymbolicLink(), 'a directory');
  }
}

/** Makes the empty file `relative` inside `root` (its folders first), replacing a link of the image's. */
async function fileInRoot(root: string, relative: string): Promise<void> {
  await mkdirInRoot(root, dirname(relative));
  const path = join(root, relative);
  const stat = await lstat(path).catch(() => undefined);
  if (stat?.isFile()) return;
  if (stat && !stat.isSymbolicLink()) throw notThere(root, path, false, 'a file');
  // The link itself goes (rm does not follow it); 'wx' creates the file only where nothing is.
  if (stat) await rm(path);
  await writeFile(path, '', { mode: 0o644, flag: 'wx' });
}

function notThere(root: string, path: string, link: boolean, want: string): AppError {
  return new AppError(
    'BACKEND_ERROR',
    `the image has ${link ? 'a symbolic link' : 'something else'} at ${path.slice(root.length)}, where the oci backend needs ${want}`,
  );
}
