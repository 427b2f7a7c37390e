/**
 * `/metrics` read as a scraper reads it: parsed by prom2javascript (it throws on a line that is not
 * the text format, and reads labelled histograms whole, which parse-prometheus-text-format does
 * not), each family typed and described; then looked up by name and labels.
 */
import assert from 'node:assert/strict';
import {
  getMetricsFromIterator,
  type PromData,
  type PromHistogramData,
  type PromMetric,
} from 'prom2javascript';

export type Scrape = ReadonlyMap<string, PromMetric>;

const TYPES = ['counter', 'gauge', 'histogram', 'summary'];

/** Parses an exposition; fails on a malformed line, or a family without HELP or a known TYPE. */
export async function parseMetrics(text: string): Promise<Scrape> {
  const families = await getMetricsFromIterator(text.split('\n')[Symbol.iterator]());
  const scrape = new Map(Object.entries(families));
  assert.ok(scrape.size > 0, 'some metrics');
  for (const [name, f] of scrape) {
    assert.ok(f.help, `${name} has HELP`);
    assert.ok(TYPES.includes(f.type), `${name} has a TYPE: ${f.type}`);
  }
  return scrape;
}

function matching<T extends { labels: Record<string, string> }>(
  data: readonly T[],
  labels: Record<string, string>,
): T[] {
  return data.filter((d) => Object.entries(labels).every(([k, v]) => d.labels[k] === v));
}

/** The sum of a counter's or gauge's samples that carry `labels` (0 when there are none yet). */
export function sampleValue(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  const f = scrape.get(name);
  if (!f) return 0;
  assert.ok(f.type === 'counter' || f.type === 'gauge', `${name} is a ${f.type}`);
  return matching(f.data as PromData[], labels).reduce((n, d) => n + d.value, 0);
}

/** How many observations a histogram's samples that carry `labels` hold. */
export function observations(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  const f = scrape.get(name);
  if (!f) return 0;
  assert.equal(f.type, 'histogram', name);
  return matching(f.data as PromHistogramData[], labels).reduce((n, d) => n + d.count, 0);
}

/** The label sets of a family's samples. */
export function labelSets(scrape: Scrape, name: string): Record<string, string>[] {
  return (scrape.get(name)?.data ?? []).map((d) => d.labels);
}
