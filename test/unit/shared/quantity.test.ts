import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatCpu, formatSize, parseCpu, parseSize } from '../../../src/shared/quantity.js';

const Ki = 1024;
const Mi = 1024 ** 2;
const Gi = 1024 ** 3;
const Ti = 1024 ** 4;

describe('parseSize', () => {
  const cases: [string | number, number | undefined][] = [
    [0, 0],
    [1, 1],
    [4096, 4096],
    [1.5, undefined],
    [-1, undefined],
    [Number.NaN, undefined],
    [Number.MAX_SAFE_INTEGER + 2, undefined],
    ['0', 0],
    ['100', 100],
    ['100b', 100],
    ['100B', 100],
    ['1k', Ki],
    ['1K', Ki],
    ['1kb', Ki],
    ['1Ki', Ki],
    ['1KiB', Ki],
    ['512m', 512 * Mi],
    ['512M', 512 * Mi],
    ['512mb', 512 * Mi],
    ['512MB', 512 * Mi],
    ['512Mi', 512 * Mi],
    ['512MiB', 512 * Mi],
    ['1g', Gi],
    ['1gb', Gi],
    ['1Gi', Gi],
    ['2GiB', 2 * Gi],
    ['1t', Ti],
    ['1Ti', Ti],
    ['1.5g', 1.5 * Gi],
    ['0.5k', 512],
    ['1.0001k', 1024],
    [' 64m ', 64 * Mi],
    ['64 m', 64 * Mi],
    ['', undefined],
    ['m', undefined],
    ['-1m', undefined],
    ['1e3', undefined],
    ['1x', undefined],
    ['1p', undefined],
    ['1tb', undefined],
    ['1..5m', undefined],
    ['.5m', undefined],
    ['1,5m', undefined],
    ['0x10', undefined],
    ['99999999999t', undefined],
  ];
  for (const [input, want] of cases) {
    test(`${JSON.stringify(input)} → ${want}`, () => assert.equal(parseSize(input), want));
  }
});

describe('parseCpu', () => {
  const cases: [string | number, number | undefined][] = [
    [1, 1000],
    [0.5, 500],
    [2, 2000],
    [0.001, 1],
    [0.0015, 2],
    [0, undefined],
    [-1, undefined],
    // rounds to zero millicores: zero would read as "no limit"
    [0.0004, undefined],
    [Number.POSITIVE_INFINITY, undefined],
    [Number.NaN, undefined],
    ['1', 1000],
    ['0.5', 500],
    ['1.25', 1250],
    ['500m', 500],
    ['1m', 1],
    ['1500m', 1500],
    [' 2 ', 2000],
    ['2 m', 2],
    ['0', undefined],
    ['0m', undefined],
    ['0.0001', undefined],
    ['0.4m', undefined],
    ['', undefined],
    ['m', undefined],
    ['1M', undefined],
    ['1k', undefined],
    ['-1', undefined],
    ['one', undefined],
    ['1 core', undefined],
  ];
  for (const [input, want] of cases) {
    test(`${JSON.stringify(input)} → ${want}`, () => assert.equal(parseCpu(input), want));
  }
});

describe('formatSize and formatCpu', () => {
  const sizes: [number, string][] = [
    [0, '0'],
    [1, '1'],
    [1023, '1023'],
    [Ki, '1Ki'],
    [1536, '1536'],
    [64 * Ki, '64Ki'],
    [Mi, '1Mi'],
    [512 * Mi, '512Mi'],
    [1536 * Mi, '1536Mi'],
    [Gi, '1Gi'],
    [4 * Gi, '4Gi'],
    [Mi + 1, String(Mi + 1)],
  ];
  for (const [n, want] of sizes) test(`formatSize(${n}) → ${want}`, () => assert.equal(formatSize(n), want));

  const cpus: [number, string][] = [
    [1000, '1'],
    [2000, '2'],
    [500, '500m'],
    [1500, '1500m'],
    [1, '1m'],
  ];
  for (const [n, want] of cpus) test(`formatCpu(${n}) → ${want}`, () => assert.equal(formatCpu(n), want));

  test('formatted quantities parse back to the same number', () => {
    for (const [n] of sizes) assert.equal(parseSize(formatSize(n)), n);
    for (const [n] of cpus) assert.equal(parseCpu(formatCpu(n)), n);
  });
});
