import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { roundOrder } from '../../../bench/stats.js';

describe('roundOrder: how a benchmark orders its paths from round to round', () => {
  for (const n of [1, 2, 3, 4, 5, 6]) {
    test(`${n} paths: each round runs every path once; over a cycle each comes first, and follows each other, equally often`, () => {
      const cycle = n % 2 === 0 ? n : 2 * n;
      const first = new Map<number, number>();
      const follows = new Map<string, number>();
      for (let round = 0; round < cycle; round++) {
        const order = roundOrder(n, round);
        assert.deepEqual(
          [...order].sort((a, b) => a - b),
          [...Array(n).keys()],
        );
        first.set(order[0]!, (first.get(order[0]!) ?? 0) + 1);
        for (let i = 1; i < n; i++) {
          const pair = `${order[i - 1]}>${order[i]}`;
          follows.set(pair, (follows.get(pair) ?? 0) + 1);
        }
        assert.deepEqual(
          roundOrder(n, round - cycle),
          order,
          'warm-up rounds (negative) follow the same cycle',
        );
      }
      assert.equal(new Set(first.values()).size, 1, `first: ${JSON.stringify([...first])}`);
      assert.equal(first.size, n);
      if (n > 1) {
        assert.equal(follows.size, n * (n - 1), 'every ordered pair occurs');
        assert.equal(new Set(follows.values()).size, 1, `follows: ${JSON.stringify([...follows])}`);
      }
    });
  }
});
