/**
 * The audit trail's cost, against no file, in the same run:
 * 1. per record: `record()` with the log only, with the file in fsynced batches (audit.flushIntervalMs
 *    100, the default), and with an fsync per record (flushIntervalMs 0, each record awaited);
 * 2. per run: warm `print(1)` runs through the service with the audit file and without it,
 *    alternated, each once its pool has a container ready. Target: the audited run's p50 within 5%
 *    (or 1 ms) of the run without a file.
 * The file lives on the machine's disk (tmpdir), where fsync is real.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { loadContext, wireDocker, type Context } from '../src/cmd/wiring.js';
import { LOCAL_PRINCIPAL } from '../src/gateway/principal.js';
import { createAuditTrail, type AuditTrail } from '../src/observability/audit-trail.js';
import { createAuditMetrics } from '../src/observability/metrics.js';
import { runRecord } from '../test/support/audit.js';
import { requireDocker } from '../test/support/docker.js';
import { percentile, report, target } from './stats.js';

const RECORDS = Number(process.env.BENCH_AUDIT_RECORDS ?? 20_000);
const FSYNC_RECORDS = Number(process.env.BENCH_AUDIT_FSYNC_RECORDS ?? 300);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);

const RECORD = runRecord({
  time: new Date().toISOString(),
  limits: {
    cpu: '1',
    memoryBytes: 536870912,
    pids: 128,
    workspaceBytes: 67108864,
    tmpBytes: 67108864,
    timeoutSeconds: 30,
    outputBytes: 1048576,
  },
});

/** A trail whose log goes to /dev/null (the log line is common to every variant). */
function trail(file: string | undefined, flushIntervalMs: number): AuditTrail {
  return createAuditTrail({
    logger: pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true })),
    metrics: createAuditMetrics(new Registry()),
    file: file ? { path: file, maxBytes: 100 * 1024 ** 2, maxFiles: 5, flushIntervalMs } : undefined,
  });
}

/** µs per `record()` call, and µs per record until every one is durable (flush awaited). */
async function batched(t: AuditTrail, n: number): Promise<{ callUs: number; durableUs: number }> {
  await t.open();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) t.record(RECORD);
  const called = performance.now();
  await t.flush();
  const done = performance.now();
  await t.close();
  return { callUs: ((called - t0) * 1000) / n, durableUs: ((done - t0) * 1000) / n };
}

/** µs per record when each is made durable before the next (an fsync each). */
async function fsyncEach(t: AuditTrail, n: number): Promise<number[]> {
  await t.open();
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    t.record(RECORD);
    await t.flush();
    samples.push((performance.now() - t0) * 1000);
  }
  await t.close();
  return samples;
}

/** The variants of one measure, alternated for `rounds` (load changes hit each alike); medians. */
async function alternate<T extends string>(
  rounds: number,
  variants: Record<T, () => Promise<number>>,
): Promise<Record<T, number>> {
  const names = Object.keys(variants) as T[];
  const samples = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<T, number[]>;
  for (let round = 0; round < rounds; round++)
    for (const name of round % 2 ? [...names].reverse() : names) samples[name].push(await variants[name]());
  return Object.fromEntries(names.map((n) => [n, percentile(samples[n], 50)])) as Record<T, number>;
}

function withAudit(ctx: Context, file: string | undefined): Context {
  const audit = file ? { ...ctx.config.audit, file } : { ...ctx.config.audit, enabled: false };
  return { ...ctx, config: { ...ctx.config, audit, pool: { ...ctx.config.pool, minIdle: 1, maxSize: 2 } } };
}

export default async function auditBench(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'sandpit-bench-audit-'));
  let n = 0;
  const path = () => join(dir, `audit-${n++}.jsonl`);
  try {
    await batched(trail(undefined, 100), RECORDS); // JIT warm-up
    const calls = await alternate(5, {
      none: async () => (await batched(trail(undefined, 100), RECORDS)).callUs,
      file: async () => (await batched(trail(path(), 100), RECORDS)).callUs,
    });
    const durable = await alternate(5, {
      file: async () => (await batched(trail(path(), 100), RECORDS)).durableUs,
    });
    const each = await fsyncEach(trail(path(), 0), FSYNC_RECORDS);
    const p50 = percentile(each, 50);
    console.log(
      `\n## audit: per record (medians of 5 alternated rounds of ${RECORDS}; the log to /dev/null in each)`,
    );
    console.log(`${'log only (no file)'.padEnd(44)} record() ${calls.none.toFixed(2)} µs`);
    console.log(
      `${'file, fsynced batches of ≤ 100 ms'.padEnd(44)} record() ${calls.file.toFixed(2)} µs (${(calls.file / calls.none).toFixed(2)}× no file); durable ${durable.file.toFixed(2)} µs/record`,
    );
    console.log(
      `${'file, fsync per record (flushIntervalMs 0)'.padEnd(44)} durable p50 ${p50.toFixed(0)} µs, p90 ${percentile(each, 90).toFixed(0)} µs per record (${(p50 / durable.file).toFixed(0)}× batched)`,
    );

    await requireDocker();
    const ctx = loadContext({ logLevel: 'warn' });
    const audited = await wireDocker(withAudit(ctx, path()));
    const plain = await wireDocker(withAudit(ctx, undefined));
    const served: Record<string, number> = {};
    /** A warm run once the pool has a container ready (the wait is not timed). */
    const run = (name: string, wiring: typeof plain) => async (): Promise<number> => {
      await wiring.backend.pool?.filled(60_000);
      const t0 = performance.now();
      const r = await wiring.service.runs.run({ template: 'python', code: 'print(1)' }, LOCAL_PRINCIPAL);
      const ms = performance.now() - t0;
      if (r.stdout !== '1\n') throw new Error(`printed ${r.stdout}`);
      if (r.served === 'warm') served[name] = (served[name] ?? 0) + 1;
      return ms;
    };
    try {
      const names = { plain: 'warm run, no audit file', audited: 'warm run, audit file (batched fsync)' };
      // Both pools fill on their first run.
      await run('warm-up', plain)();
      await run('warm-up', audited)();
      const samples: Record<string, number[]> = { [names.plain]: [], [names.audited]: [] };
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 ? [names.audited, names.plain] : [names.plain, names.audited];
        for (const name of order)
          samples[name]!.push(await run(name, name === names.plain ? plain : audited)());
      }
      const series = Object.entries(samples).map(([name, s]) => ({ name, samples: s }));
      const rows = report('audit: per warm run (python print(1), through the service)', series, names.plain);
      console.log(`served warm: ${JSON.stringify(served)}`);
      const [a, b] = rows;
      const slack = Math.max(1, a!.p50 * 0.05);
      target(
        'audited warm run p50 within 5% (or 1 ms) of no file',
        b!.p50 - a!.p50 <= slack,
        `${b!.p50.toFixed(1)} ms vs ${a!.p50.toFixed(1)} ms`,
      );
    } finally {
      await audited.service.shutdown();
      await plain.service.shutdown();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
