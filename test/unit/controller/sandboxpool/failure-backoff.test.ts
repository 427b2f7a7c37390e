import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FailureBackoff } from '../../../../src/controller/sandboxpool/failure-backoff.js';

describe('FailureBackoff', () => {
  test('no failure: create now', () => {
    const b = new FailureBackoff();
    assert.equal(b.next('ns/p', { failed: 0, anyReady: false, nowMs: 0 }), 0);
    assert.equal(b.failures('ns/p'), 0);
  });

  test('each pass with failed pods doubles the wait, up to 60 s; passes between wait out the rest', () => {
    const b = new FailureBackoff();
    assert.equal(b.next('ns/p', { failed: 2, anyReady: false, nowMs: 0 }), 1000);
    assert.equal(b.next('ns/p', { failed: 0, anyReady: false, nowMs: 400 }), 600);
    assert.equal(b.next('ns/p', { failed: 0, anyReady: false, nowMs: 1000 }), 0);
    assert.equal(b.next('ns/p', { failed: 1, anyReady: false, nowMs: 1000 }), 2000);
    assert.equal(b.failures('ns/p'), 2);
    let wait = 0;
    for (let i = 0; i < 10; i += 1) wait = b.next('ns/p', { failed: 1, anyReady: false, nowMs: 5000 });
    assert.equal(wait, 60_000);
  });

  test('a ready pod resets it; pools are apart', () => {
    const b = new FailureBackoff();
    b.next('ns/p', { failed: 1, anyReady: false, nowMs: 0 });
    assert.equal(b.next('ns/q', { failed: 0, anyReady: false, nowMs: 0 }), 0);
    assert.equal(b.next('ns/p', { failed: 0, anyReady: true, nowMs: 10 }), 0);
    assert.equal(b.failures('ns/p'), 0);
  });
});
