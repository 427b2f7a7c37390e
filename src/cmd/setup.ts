/** `sandpit setup`: prepares this machine: a running Docker engine (with gVisor registered) and the images. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { AppError } from '../shared/errors.js';
import { parse, printHelp } from './args.js';
import { PACKAGE_ROOT } from './process.js';
import { buildImages } from './images.js';

export const SETUP_USAGE = `
usage: sandpit setup [--force-images]

Prepares a Debian/Ubuntu machine for the Docker backend, idempotently:
  1. installs Debian's docker.io (and runsc for gVisor) if no engine answers, starts dockerd,
     and registers the runsc runtime (and runsc-egress, runsc with --host-uds=open, for
     sandboxes whose one way out is sandpit's egress proxy socket);
  2. builds the sandbox images from Debian packages (skips the ones that are up to date).
Needs root. Safe to run again: what is already there is reused.
options:
  --force-images   rebuild the images even when up to date
  -h, --help       this text
`;

export function setupCommand(argv: string[]): number {
  const { values } = parse(argv, { 'force-images': { type: 'boolean' } }, SETUP_USAGE);
  if (values.help) {
    printHelp(SETUP_USAGE);
    return 0;
  }
  if (process.getuid?.() !== 0) {
    throw new AppError(
      'INVALID_REQUEST',
      'sandpit setup installs packages and starts dockerd, so it needs root',
      {
        hint: 'run it as root, e.g. `sudo sandpit setup` (or `sudo npx -y sandpit-mcp setup`)',
      },
    );
  }
  const engine = spawnSync('bash', [join(PACKAGE_ROOT, 'scripts', 'docker-engine.sh'), 'up'], {
    stdio: 'inherit',
  });
  if (engine.status !== 0) return engine.status ?? 70;
  return buildImages([], values['force-images'] ?? false);
}
