/**
 * A small tmpfs of our own, for real ENOSPC and EROFS: `mount -t tmpfs -o size=…`. Needs root (the
 * CI machine runs as root); anywhere else the test fails and says so, it does not skip.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Tmpfs {
  dir: string;
  /** Remounts read-only (`true`) or read-write. */
  readOnly(ro: boolean): void;
  unmount(): void;
}

export function mountTmpfs(sizeKiB: number, options: { readOnly?: boolean } = {}): Tmpfs {
  if (process.getuid?.() !== 0)
    throw new Error(
      'this test mounts a tmpfs for real ENOSPC/EROFS and needs root: run it as root (CI does)',
    );
  const dir = mkdtempSync(join(tmpdir(), 'sandpit-tmpfs-'));
  const opts = `size=${sizeKiB}k,mode=0755${options.readOnly ? ',ro' : ''}`;
  execFileSync('mount', ['-t', 'tmpfs', '-o', opts, 'sandpit-test', dir]);
  let mounted = true;
  return {
    dir,
    readOnly: (ro) => execFileSync('mount', ['-o', `remount,${ro ? 'ro' : 'rw'}`, dir]),
    unmount: () => {
      if (!mounted) return;
      mounted = false;
      execFileSync('umount', [dir]);
      rmdirSync(dir);
    },
  };
}

/** Writes filler into `dir` until the filesystem has no byte left; returns the filler's path. */
export function fill(dir: string): string {
  const path = join(dir, 'filler');
  // dd stops at ENOSPC; its non-zero exit is the point.
  try {
    execFileSync('dd', ['if=/dev/zero', `of=${path}`, 'bs=4096'], { stdio: 'ignore' });
  } catch {
    // full
  }
  return path;
}
