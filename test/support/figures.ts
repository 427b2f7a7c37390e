/**
 * Figures a test measured (load, soak), recorded with the test for the reliability report: a
 * diagnostic that test/support/results-reporter.mjs attaches to the test's record.
 */
import type { TestContext } from 'node:test';

/** A figure: what was measured, its value and unit, and the bound it was held to, if any. */
export interface Figure {
  name: string;
  value: number;
  unit: string;
  bound?: string;
}

export function recordFigure(t: Pick<TestContext, 'diagnostic'>, figure: Figure): void {
  t.diagnostic(`figure ${JSON.stringify(figure)}`);
}
