/**
 * `npm run gen:crd`: writes every generated file: the CRDs from the zod schemas (src/api/v1alpha1)
 * into crds/ and the chart's crds/, and sandpit's seccomp profiles (src/policy/seccomp.ts) into the
 * chart's files/seccomp/; and removes any other file in those folders. `--check` writes nothing and exits 1 when a
 * file on disk differs, is missing or is not generated (the unit tests check the same).
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CRD_DIRS, generatedCrdFiles } from '../api/v1alpha1/render.js';
import { generatedSeccompFiles, SECCOMP_CHART_DIR } from '../policy/seccomp.js';
import { PACKAGE_ROOT } from './process.js';

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

const GENERATED_DIRS = [...CRD_DIRS, SECCOMP_CHART_DIR];

/** Files in the generated folders that the generator does not write. */
function strays(wanted: ReadonlySet<string>): string[] {
  return GENERATED_DIRS.flatMap((dir) =>
    readdirSync(path.join(PACKAGE_ROOT, dir))
      .map((f) => `${dir}/${f}`)
      .filter((f) => !wanted.has(f)),
  );
}

function main(argv: string[]): number {
  const files = [...generatedCrdFiles(), ...generatedSeccompFiles()];
  const extra = strays(new Set(files.map((f) => f.path)));
  if (argv.includes('--check')) {
    const drifted = files.filter((f) => read(path.join(PACKAGE_ROOT, f.path)) !== f.text).map((f) => f.path);
    for (const f of drifted) console.error(`${f} is out of date: run npm run gen:crd`);
    for (const f of extra) console.error(`${f} is not generated: npm run gen:crd removes it`);
    return drifted.length + extra.length > 0 ? 1 : 0;
  }
  for (const f of files) {
    writeFileSync(path.join(PACKAGE_ROOT, f.path), f.text);
    console.log(`wrote ${f.path}`);
  }
  for (const f of extra) {
    rmSync(path.join(PACKAGE_ROOT, f));
    console.log(`removed ${f} (nothing generates it)`);
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
