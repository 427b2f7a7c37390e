// The README's security section quotes the committed reliability report's totals (issue 21): the
// two cannot drift apart.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseTotals } from '../../reliability/report.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');

test("the README quotes docs/reliability.md's totals", () => {
  const report = parseTotals(read('docs/reliability.md'));
  const m = new RegExp(
    [
      String.raw`\*\*(\d+) hostile cases\*\*,`,
      String.raw`\*\*(\d+) tries\*\*,`,
      String.raw`\*\*(\d+) contained\*\*;`,
      String.raw`\*\*(\d+) of (\d+) faults survived\*\*;`,
      String.raw`\*\*(\d+) of (\d+) load checks passed\*\*`,
    ].join(String.raw`\s+`),
  ).exec(read('README.md'));
  assert.ok(m, 'the README states the totals in its security section');
  const [cases, tries, contained, faultsSurvived, faults, loadPassed, loadChecks] = m.slice(1).map(Number);
  assert.deepEqual({ cases, tries, contained, faults, faultsSurvived, loadChecks, loadPassed }, report);
});
