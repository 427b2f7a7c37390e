/**
 * The host mounts of the OCI backend: a shared root file system is bind-mounted read-only onto
 * itself (util-linux `mount`), so that nothing writes into it, not even a runtime that would
 * create a missing mount point.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
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
