// Metric names as Prometheus users expect them: the default process and Node.js metrics under their
// standard names (stock dashboards and alerts find them), sandpit's own prefixed sandpit_, and a
// `component` label on every series that tells the gateway from the operator.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createOperatorMetrics } from '../../../src/controller/metrics.js';
import { createMetrics } from '../../../src/observability/metrics.js';

/** Metric names in a scrape (from # TYPE lines), and every sample line. */
function parse(text: string): { names: string[]; samples: string[] } {
  const names = [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
  const samples = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  return { names, samples };
}

const STANDARD = [
  'process_cpu_seconds_total',
  'process_resident_memory_bytes',
  'nodejs_heap_size_used_bytes',
];

for (const [component, make] of [
  ['gateway', () => createMetrics({ defaultMetrics: true }).registry],
  ['operator', () => createOperatorMetrics({ defaultMetrics: true }).registry],
] as const) {
  test(`${component}: standard default metrics, sandpit_ for its own, component="${component}" on every series`, async () => {
    const { names, samples } = parse(await make().metrics());
    for (const name of STANDARD)
      assert.ok(names.includes(name), `${name} is exported under its standard name`);
    assert.deepEqual(
      names.filter((n) => /^sandpit_(operator_)?(process|nodejs)_/.test(n)),
      [],
      'no prefixed copies of the default metrics',
    );
    const defaults = names.filter((n) => /^(process|nodejs)_/.test(n));
    const own = names.filter((n) => !defaults.includes(n));
    assert.ok(own.length > 3, 'its own metrics are there');
    assert.deepEqual(
      own.filter((n) => !n.startsWith('sandpit_')),
      [],
      'every metric of its own is prefixed sandpit_',
    );
    assert.ok(samples.length > 10);
    for (const line of samples) assert.match(line, new RegExp(`component="${component}"`), line);
  });
}
