/**
 * The host mounts of the OCI backend: a shared root file system is bind-mounted read-only onto
 * itself (util-linux `mount`), so that nothing writes into it, not even a runtime that would
 * create a missing mount point. A root unpacked before a mount point was added gets it below the
 * read-only mount (writeBelowMount).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { AppError } from '../../shared/errors.js';

const run = promisify(execFile);

/** The mount points in a /proc/self/mountinfo text (field 5, with its octal escapes undone). */
export function mountPointsOf(mountinfo: string): string[] {
  return mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => p !== undefined && p !== '')
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
}

export async function isMountPoint(path: string): Promise<boolean> {
  return mountPointsOf(await readFile('/proc/self/mountinfo', 'utf8')).includes(path);
}

/** Bind-mounts `path` onto itself, read-only (nosuid, nodev too). */
export async function mountReadOnly(path: string): Promise<void> {
  try {
    await run('mount', ['--bind', path, path]);
    await run('mount', ['-o', 'remount,bind,ro,nosuid,nodev', path]);
  } catch (e) {
    await unmount(path);
    throw new AppError('BACKEND_ERROR', `cannot mount ${path} read-only: ${(e as Error).message}`, {
      hint: 'the oci backend runs as root (see `sandpit doctor`)',
      cause: e,
    });
  }
}

/** Unmounts `path` when it is a mount point; never throws. */
export async function unmount(path: string): Promise<void> {
  if (await isMountPoint(path).catch(() => false)) await run('umount', [path]).catch(() => undefined);
}

/**
 * Runs `write` on the directory that `path`, mounted read-only onto itself, hides: through a plain
 * (non-recursive) bind of its parent elsewhere, which shows the directory without the mount on it,
 * writable. The read-only mount stays in place throughout, for the runs that use it.
 */
export async function writeBelowMount(path: string, write: (dir: string) => Promise<void>): Promise<void> {
  const peek = await mkdtemp(join(tmpdir(), 'sandpit-rootfs-'));
  try {
    await run('mount', ['--bind', dirname(path), peek]);
    try {
      await write(join(peek, basename(path)));
    } finally {
      await run('umount', [peek]);
    }
  } catch (e) {
    throw new AppError('BACKEND_ERROR', `cannot add to ${path}: ${(e as Error).message}`, { cause: e });
  } finally {
    await rmdir(peek).catch(() => undefined);
  }
}
