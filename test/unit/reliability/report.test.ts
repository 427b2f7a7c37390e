import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseTotals, place, renderReport, totals, type TestRecord } from '../../reliability/report.js';

const record = (suites: string[], name: string, status: TestRecord['status'] = 'pass'): TestRecord => ({
  file: 'test/hostile/x.test.ts',
  suites,
  name,
  status,
  durationMs: 1,
});

const RECORDS: TestRecord[] = [
  record(['hostile: resource bombs (docker, runc, warm, run)'], 'a fork bomb'),
  record(['hostile: resource bombs (docker, runsc, cold, run)'], 'a fork bomb'),
  record(['hostile: resource bombs (oci, runc, cold, run)'], 'a fork bomb', 'fail'),
  record(['hostile: resource bombs (docker, runc, warm, run)'], 'a memory bomb'),
  record(['hostile: escape and privilege techniques (docker, runc, warm, run)', 'mounts'], 'a tmpfs'),
  record(['faults: dockerd restarted'], 'mid-run: a typed error'),
  record(['faults: dockerd restarted'], 'mid-session: EngineRestarted', 'fail'),
  { ...record(['load: a soak (docker)'], 'RSS'), figures: [{ name: 'p50', value: 30, unit: 'ms' }] },
  record(['contract: docker backend'], 'not in the report'),
];

describe('the reliability report', () => {
  test('a suite title gives the kind, category and configuration', () => {
    assert.deepEqual(place(RECORDS[0]!) && { ...place(RECORDS[0]!), record: undefined }, {
      kind: 'hostile',
      category: 'resource bombs',
      config: 'docker, runc, warm, run',
      record: undefined,
    });
    assert.equal(place(RECORDS[5]!)?.config, '');
    assert.equal(place(RECORDS[8]!), undefined);
  });

  test('totals count distinct cases, tries, and what held', () => {
    assert.deepEqual(totals(RECORDS), {
      cases: 3,
      tries: 5,
      contained: 4,
      faults: 2,
      faultsSurvived: 1,
      loadChecks: 1,
      loadPassed: 1,
    });
  });

  test('the table has a column per configuration and names what failed, and why', () => {
    const text = renderReport(RECORDS, { date: '2026-12-03', machine: 'm', matrix: 'ci' });
    assert.match(
      text,
      /\| case \| docker, runc, warm, run \| docker, runsc, cold, run \| oci, runc, cold, run \|/,
    );
    assert.match(text, /\| a fork bomb \| contained \| contained \| \*\*failed\*\* \|/);
    assert.match(text, /\| a memory bomb \| contained \| – \| – \|/);
    assert.match(text, /\| mounts › a tmpfs \| contained \|/);
    assert.match(text, /\| resource bombs \| oci, runc, cold, run \| a fork bomb \| *\|/);
    assert.match(text, /\| Faults survived \| 1 of 2 \|/);
    assert.match(text, /\| a soak, docker \| RSS \| passed \| p50 30 ms \|/);
    assert.doesNotMatch(text, /not in the report/);
  });
});

test('a report states the totals it was made with', () => {
  const text = renderReport(RECORDS, { date: '2026-12-03', machine: 'm', matrix: 'ci' });
  assert.deepEqual(parseTotals(text), totals(RECORDS));
});
