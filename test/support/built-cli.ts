/**
 * The built CLI (dist/), for tests that spawn `sandpit` as a user would: it starts in a fraction
 * of the CPU time that transpiling the source through tsx takes, which adds up on two loaded cores.
 * ensureBuilt() runs `npm run build` when dist/ is missing or older than any source file; it looks
 * once per test process (a file may start many operators).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BUILT_CLI = join(ROOT, 'dist/cmd/cli.js');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

let built = false;

export function ensureBuilt(): void {
  if (built) return;
  const newest = Math.max(newestMtime(join(ROOT, 'src')), statSync(join(ROOT, 'package.json')).mtimeMs);
  if (existsSync(BUILT_CLI) && statSync(BUILT_CLI).mtimeMs >= newest) {
    built = true;
    return;
  }
  try {
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'pipe' });
    built = true;
  } catch (e) {
    const err = e as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`npm run build failed:\n${String(err.stdout ?? '')}${String(err.stderr ?? '')}`, {
      cause: e,
    });
  }
}
