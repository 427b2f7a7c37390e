/** `sandpit images build|list`: the sandbox images, built offline from Debian packages. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import Docker from 'dockerode';
import { MANAGED_FILTER } from '../backends/docker/labels.js';
import { engineError } from '../backends/docker/engine-errors.js';
import { parse, printHelp } from './args.js';
import { PACKAGE_ROOT } from './process.js';
import { loadContext } from './wiring.js';

export const IMAGES_USAGE = `
usage: sandpit images build [--force] [TEMPLATE...]
       sandpit images list

  build   builds sandpit/python:3.11, sandpit/python-data:3.11, sandpit/node:18, sandpit/bash:5,
          sandpit/c:12 and sandpit/rust:1 from Debian 12 packages (no registry needed); up-to-date
          images are skipped. Needs root and a running engine (sandpit setup starts one).
  list    the sandpit images in the engine, with their sizes
options:
  --force         rebuild even when up to date
  --config PATH   config file (for the engine socket)
  -h, --help      this text
`;

export async function imagesCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { force: { type: 'boolean' }, config: { type: 'string' } },
    IMAGES_USAGE,
  );
  const [sub, ...names] = positionals;
  if (values.help || sub === undefined) {
    printHelp(IMAGES_USAGE);
    return sub === undefined && !values.help ? 64 : 0;
  }
  if (sub === 'build') return buildImages(names, values.force ?? false);
  if (sub === 'list') return listImages(values.config);
  process.stderr.write(`sandpit images: unknown subcommand "${sub}"\n${IMAGES_USAGE}`);
  return 64;
}

export function buildImages(names: string[], force: boolean): number {
  const script = join(PACKAGE_ROOT, 'images', 'build.sh');
  const r = spawnSync('bash', [script, ...(force ? ['--force'] : []), ...names], { stdio: 'inherit' });
  return r.status ?? 70;
}

async function listImages(configPath: string | undefined): Promise<number> {
  const { config } = loadContext({ configPath });
  const docker = new Docker({ socketPath: config.docker.socketPath });
  let images: Docker.ImageInfo[];
  try {
    images = await docker.listImages({ filters: { label: [MANAGED_FILTER] } });
  } catch (e) {
    throw engineError(e, {});
  }
  const rows = images
    .flatMap((i) =>
      (i.RepoTags ?? []).map((tag) => ({
        tag,
        size: i.Size,
        template: i.Labels?.['sandpit.dev/template'] ?? '',
      })),
    )
    .filter((r) => r.tag !== '<none>:<none>')
    .sort((a, b) => a.tag.localeCompare(b.tag));
  for (const r of rows)
    process.stdout.write(
      `${r.tag.padEnd(28)} ${(r.size / 1024 ** 2).toFixed(0).padStart(6)} MB  ${r.template}\n`,
    );
  if (rows.length === 0) process.stdout.write('no sandpit images; build them with `sandpit images build`\n');
  return 0;
}
