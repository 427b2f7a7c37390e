/**
 * `npm run gen:crd`: writes crds/sandboxruns.sandpit.dev.yaml from the zod schemas (src/api/v1alpha1).
 * `--check` exits 1 when the file on disk differs (the unit tests check the same).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CRD_FILE } from '../api/v1alpha1/crd.js';
import { renderCrdYaml } from '../api/v1alpha1/render.js';
import { PACKAGE_ROOT } from './process.js';

function main(argv: string[]): number {
  const file = path.join(PACKAGE_ROOT, CRD_FILE);
  const text = renderCrdYaml();
  if (argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(file, 'utf8');
    } catch {
      // missing counts as drift
    }
    if (current === text) return 0;
    console.error(`${CRD_FILE} is out of date: run npm run gen:crd`);
    return 1;
  }
  writeFileSync(file, text);
  console.log(`wrote ${CRD_FILE}`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
