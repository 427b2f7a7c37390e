/** Percentiles and the report format every benchmark prints: figures and ratios against a baseline measured in the same run. */
export interface Series {
  name: string;
  samples: number[];
}

export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length)); // nearest rank
  return sorted[rank - 1]!;
}

export function summarize(s: Series): { name: string; n: number; p50: number; p90: number; max: number } {
  return {
    name: s.name,
    n: s.samples.length,
    p50: percentile(s.samples, 50),
    p90: percentile(s.samples, 90),
    max: Math.max(...s.samples),
  };
}

/** Prints a table of p50/p90 in ms and each series' p50 ratio against `baseline`. */
export function report(title: string, series: Series[], baseline: string): ReturnType<typeof summarize>[] {
  const rows = series.map(summarize);
  const base = rows.find((r) => r.name === baseline);
  console.log(`\n## ${title}`);
  console.log(
    `${'path'.padEnd(40)} ${'n'.padStart(4)} ${'p50 ms'.padStart(9)} ${'p90 ms'.padStart(9)} ${'max ms'.padStart(9)}  ratio(p50 vs ${baseline})`,
  );
  for (const r of rows) {
    const ratio = base ? (r.p50 / base.p50).toFixed(2) : '-';
    console.log(
      `${r.name.padEnd(40)} ${String(r.n).padStart(4)} ${r.p50.toFixed(1).padStart(9)} ${r.p90.toFixed(1).padStart(9)} ${r.max.toFixed(1).padStart(9)}  ${ratio}`,
    );
  }
  return rows;
}

/**
 * A path interleaved() times: `run` alone is timed; `prepare` runs before it and `after` after it,
 * neither timed (making a container ahead, removing it).
 */
export type Path =
  | (() => Promise<unknown>)
  | {
      prepare?: () => Promise<unknown>;
      run: () => Promise<unknown>;
      after?: () => Promise<unknown>;
    };

/**
 * The order of n paths in a round: a row of a balanced Latin square (Williams), so that over the
 * rounds each path comes first, and follows each other path, equally often. A rotated fixed order
 * would give each path the same predecessor every round, and with it the same leftovers of that
 * predecessor's work (a pool's refill, a container's removal).
 */
export function roundOrder(n: number, round: number): number[] {
  const first = [0];
  for (let lo = 1, hi = n - 1; first.length < n;) first.push(first.length % 2 === 1 ? lo++ : hi--);
  const rows = n % 2 === 0 ? n : 2 * n;
  const r = ((round % rows) + rows) % rows;
  const row = first.map((x) => (x + r) % n);
  return r >= n ? row.reverse() : row;
}

/**
 * Runs each path once per round, in roundOrder(), so load changes hit every path alike; the
 * warm-up rounds are not counted. `before`, when given, runs untimed before each timed call, after
 * the path's own `prepare` (e.g. waiting for pods to be gone, then a pause).
 */
export async function interleaved(
  rounds: number,
  paths: Record<string, Path>,
  warmup = 2,
  before?: () => Promise<void>,
): Promise<Series[]> {
  const names = Object.keys(paths);
  const samples: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let round = -warmup; round < rounds; round++) {
    for (const i of roundOrder(names.length, round)) {
      const name = names[i]!;
      const given = paths[name]!;
      const path = typeof given === 'function' ? { run: given } : given;
      await path.prepare?.();
      await before?.();
      const t0 = performance.now();
      await path.run();
      const ms = performance.now() - t0;
      await path.after?.();
      if (round >= 0) samples[name]!.push(ms);
    }
  }
  return names.map((name) => ({ name, samples: samples[name]! }));
}

export function target(label: string, ok: boolean, detail: string): boolean {
  console.log(`${ok ? 'MET ' : 'MISS'} ${label}: ${detail}`);
  return ok;
}
