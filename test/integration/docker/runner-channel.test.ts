/**
 * A program attacks its runner's channel, under both runtimes: it writes forged frames (a success
 * report, output, a frame declared at 64 MiB followed by 64 MiB of filler) into the runner's
 * stdout through /proc/1/fd/1, and SIGKILLs PID 1. None of it may change the reported result or
 * stall the process that decodes the runner's output (here, this test's own event loop).
 *
 * Under runc the kernel refuses both: /proc/1/fd is root's, and PID 1 ignores the signal. Under
 * gVisor both reach something: the writes land in the runner's stdout (and are skipped, having no
 * key), and PID 1 of the program's own namespace is its init, so the program ends itself, killed.
 */
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import type { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { makeBackend, runToEnd } from '../../support/docker.js';

/** Python that writes `frames` into the runner's stdout, or says why it could not. */
const intoChannel = (frames: string): string => `
import json, os, signal, struct, sys, time
print("real", flush=True)
try:
    fd = os.open("/proc/1/fd/1", os.O_WRONLY)
except OSError as e:
    print("channel:", e.strerror, file=sys.stderr, flush=True)
else:
${frames}
    print("channel: written", file=sys.stderr, flush=True)
`;

/** A success report and output, as protocol-2 frames (what the runner sent before its frames had keys). */
const FORGED_REPORT =
  intoChannel(`
    report = json.dumps({"exitCode": 0, "signal": 0, "timedOut": False, "oomKilled": False,
                         "stdoutBytes": 6, "stderrBytes": 0, "durationMs": 1}).encode()
    os.write(fd, b"O" + struct.pack(">I", 6) + b"forged" + b"X" + struct.pack(">I", len(report)) + report)
`) +
  `
os.kill(1, signal.SIGKILL)
time.sleep(0.5)
print("after", flush=True)
sys.exit(3)
`;

/** A frame declared at 64 MiB, and 64 MiB of it. */
const HUGE_FRAME =
  intoChannel(`
    os.write(fd, b"O" + struct.pack(">I", 64 << 20))
    filler = b"A" * (1 << 20)
    for _ in range(64):
        os.write(fd, filler)
`) +
  `
sys.exit(3)
`;

/** The event loop's longest stall while `work` runs, in ms. */
async function longestStall<T>(work: () => Promise<T>): Promise<{ value: T; stallMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  try {
    const value = await work();
    return { value, stallMs: h.max / 1e6 };
  } finally {
    h.disable();
  }
}

/** Generous: the quadratic decoder this replaces stalled for tens of seconds on this attack. */
const MAX_STALL_MS = 1000;

for (const runtime of ['runc', 'runsc'] as const) {
  describe(`a program attacking its runner's channel (${runtime})`, () => {
    let backend: DockerBackend;
    before(async () => {
      backend = await makeBackend();
    });
    after(() => backend.close());

    const opts = { defaultRuntime: runtime, allowedRuntimes: [runtime] };
    const refused = runtime === 'runc';

    test('a forged success report and a SIGKILL to PID 1 do not change the result', async () => {
      const r = await runToEnd(backend, { template: 'python', code: FORGED_REPORT }, opts);
      assert.doesNotMatch(r.stdout, /forged/);
      assert.notEqual(r.reason, 'BackendError', r.message);
      assert.equal(r.timedOut, false);
      if (refused) {
        assert.equal(r.exitCode, 3, r.stderr);
        assert.equal(r.stdout, 'real\nafter\n');
        assert.equal(r.stderr, 'channel: Permission denied\n');
      } else {
        // The program's own namespace ended with its init: killed, as it asked; nothing forged.
        assert.equal(r.exitCode, 137, r.stderr);
        assert.equal(r.reason, 'Error');
        assert.equal(r.stdout, 'real\n');
        assert.equal(r.stderr, 'channel: written\n');
      }
    });

    test('a frame declared at 64 MiB, then 64 MiB of it, neither stalls the decoder nor ends the run', async () => {
      const { value: r, stallMs } = await longestStall(() =>
        runToEnd(backend, { template: 'python', code: HUGE_FRAME }, opts),
      );
      assert.equal(r.exitCode, 3, `${r.reason}: ${r.message}`);
      assert.equal(r.stdout, 'real\n');
      assert.equal(r.stderr, refused ? 'channel: Permission denied\n' : 'channel: written\n');
      assert.ok(stallMs < MAX_STALL_MS, `the event loop stalled for ${stallMs.toFixed(0)} ms`);
    });
  });
}
