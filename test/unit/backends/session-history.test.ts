/**
 * An exec read back from the runner's history (finishedExec): the same result the gateway that ran
 * it made while the runner kept all of each stream, and the last bytes of a longer one, marked
 * truncated with its exact size.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { finishedExec } from '../../../src/backends/session-sandbox.js';
import { StreamCapture } from '../../../src/runner/capture.js';
import { outputWindow } from '../../../src/runner/protocol.js';
import type { HistoryEntry } from '../../../src/runner/session-client.js';
import { RETAINED_OUTPUT_BYTES } from '../../../src/runner/session-protocol.js';

const NOW = Date.parse('2026-01-02T03:04:05.000Z');

function entry(
  stdout: Buffer,
  stdoutBytes: number,
  outputBytes: number,
  extra: Partial<HistoryEntry> = {},
): HistoryEntry {
  const w = outputWindow(outputBytes);
  return {
    id: 7,
    name: 'exec-0123456789ab',
    background: true,
    startedAgoMs: 3000,
    finishedAgoMs: 1000,
    deadlineMs: 30_000,
    window: [w.headBytes, w.tailBytes],
    argv: ['sh', '-c', 'x'],
    report: {
      exitCode: 0,
      signal: 0,
      timedOut: false,
      oomKilled: false,
      killed: false,
      stdoutBytes,
      stderrBytes: 0,
      durationMs: 2000,
    },
    stdout,
    stderr: Buffer.alloc(0),
    ...extra,
  };
}

/** What the gateway that ran it made: the head live, the runner's tail at the end. */
function live(all: Buffer, outputBytes: number) {
  const w = outputWindow(outputBytes);
  const c = new StreamCapture(w);
  c.add(all.subarray(0, w.headBytes));
  c.addTail(all.subarray(Math.max(w.headBytes, all.length - w.tailBytes)));
  return c.finish(all.length);
}

describe('an exec from the runner’s history', () => {
  test('all of its output kept: the result its own gateway made, cut by its own window', () => {
    for (const [size, outputBytes] of [
      [12, 1024],
      [5000, 1024],
      [RETAINED_OUTPUT_BYTES, 4 * RETAINED_OUTPUT_BYTES],
    ] as const) {
      const all = Buffer.from('line\n'.repeat(size).slice(0, size));
      const f = finishedExec(entry(all, size, outputBytes), NOW);
      assert.deepEqual(f.outcome.stdout, live(all, outputBytes), `${size} bytes, window ${outputBytes}`);
    }
  });

  test('more than the runner keeps: its last bytes, truncated, with the exact size', () => {
    const size = 3 * RETAINED_OUTPUT_BYTES;
    const kept = Buffer.alloc(RETAINED_OUTPUT_BYTES, 'y');
    const f = finishedExec(entry(kept, size, 1024 * 1024), NOW);
    assert.equal(f.outcome.stdout.bytes, size);
    assert.equal(f.outcome.stdout.truncated, true);
    assert.ok(f.outcome.stdout.text.endsWith(`\n${'y'.repeat(RETAINED_OUTPUT_BYTES)}`));
  });

  test('its id, argv, times and deadline; killed by a gateway reads as cancelled', () => {
    const f = finishedExec(entry(Buffer.from('ok\n'), 3, 1024), NOW);
    assert.equal(f.execId, 'exec-0123456789ab');
    assert.deepEqual(f.argv, ['sh', '-c', 'x']);
    assert.equal(f.background, true);
    assert.equal(f.timeoutSeconds, 30);
    assert.equal(f.outcome.startedAt, NOW - 3000);
    assert.equal(f.outcome.finishedAt, NOW - 1000);
    assert.equal(f.outcome.outcome.phase, 'Succeeded');
    const killed = entry(Buffer.alloc(0), 0, 1024);
    killed.report = { ...killed.report, exitCode: 137, signal: 9, killed: true };
    assert.equal(finishedExec(killed, NOW).outcome.outcome.phase, 'Cancelled');
  });
});
