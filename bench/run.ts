/**
 * `npm run bench [NAME...]`: runs the benchmarks in bench/*.bench.ts (all, or the named ones).
 * Each prints p50/p90 and ratios against the raw engine measured in the same run.
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => wanted.length === 0 || wanted.includes(f.replace(/\.bench\.ts$/, '')))
  .sort();
if (files.length === 0) {
  console.error(`no benchmarks match ${wanted.join(' ')}`);
  process.exit(64);
}
console.log(
  `# sandpit benchmarks (${new Date().toISOString()}, load ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')})`,
);
for (const f of files) {
  const mod = (await import(join(here, f))) as { default: () => Promise<void> };
  await mod.default();
}
