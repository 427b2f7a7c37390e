/**
 * A program attacks its runner's channel, under both runtimes: it writes forged frames (a success
 * report, output, a frame declared at 64 MiB followed by 64 MiB of filler) into the runner's
 * stdout through /proc/1/fd/1, and SIGKILLs PID 1. None of it may change the reported result or
 * stall the process that decodes the runner's output (here, this test's own event loop).
 *
 * Under runc the kernel refuses both: /proc/1/fd is root's, and PID 1 ignores the signal. Under
 * gVisor both reach something: the writes land in the runner's stdout (and are skipped, having no
 * key), and PID 1 of the program's own namespace is its init, so the program ends itself, killed.
 *
 * In `--plain` mode (a Kubernetes pod's: its log is the runner's stdout and stderr, unframed) the
 * program floods and forges lines through /proc/1/fd/1 and /proc/1/fd/2: the container's log must
 * hold only what the runner forwarded, within the output limit.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import { buildContainerConfig } from '../../../src/backends/docker/container-config.js';
import { DockerDemuxer } from '../../../src/backends/docker/demux.js';
import type { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { currentOwner } from '../../../src/backends/docker/owner.js';
import { encodeJob } from '../../../src/runner/protocol.js';
import { makeBackend, requireDocker, runId, runToEnd, spec } from '../../support/docker.js';

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

/**
 * Python that writes a forged line and 8 MiB into the runner's stdout and stderr (its pod log in
 * --plain mode), saying for each whether it could open it; and 256 KiB of its own output.
 */
const INTO_LOG = `
import os, sys
print("real start", flush=True)
said = []
for n in (1, 2):
    try:
        fd = os.open(f"/proc/1/fd/{n}", os.O_WRONLY)
    except OSError as e:
        said.append(f"{n}:{e.strerror}")
        continue
    os.write(fd, b"\\nINJECTED: a line the runner never wrote\\n")
    for _ in range(128):
        os.write(fd, b"I" * 65536)
    said.append(f"{n}:written")
print("channel", *said, flush=True)
sys.stdout.write("o" * (256 << 10))
print("\\nreal end", flush=True)
sys.exit(3)
`;

const PLAIN_OUTPUT_BYTES = 64 << 10;

/**
 * Runs `code` the way a Kubernetes pod runs it: the runner reads its job from a read-only file
 * (`--job FILE --plain`), no stdin, its stdout and stderr the container's log (json-file here).
 * Returns the exit code and the log, each stream on its own.
 */
async function runPlain(
  docker: Docker,
  code: string,
  runtime: string,
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const effective = spec(
    { template: 'python', code, timeoutSeconds: 30 },
    { defaultRuntime: runtime, allowedRuntimes: [runtime], ceilings: { outputBytes: PLAIN_OUTPUT_BYTES } },
  );
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-plain-'));
  chmodSync(dir, 0o755);
  writeFileSync(path.join(dir, 'job.bin'), encodeJob(effective), { mode: 0o444 });
  const config = buildContainerConfig(effective, {
    name: `sandpit-plain-${runId()}`,
    kind: 'run',
    owner: currentOwner(),
  });
  const container = await docker.createContainer({
    ...config,
    Cmd: ['--job', '/sandpit/job/job.bin', '--plain'],
    AttachStdin: false,
    OpenStdin: false,
    StdinOnce: false,
    HostConfig: {
      ...config.HostConfig,
      Binds: [`${dir}:/sandpit/job:ro`],
      LogConfig: { Type: 'json-file', Config: {} },
    },
  });
  try {
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    const log = await container.logs({ stdout: true, stderr: true, follow: false });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    new DockerDemuxer(
      (b) => out.push(b),
      (b) => err.push(b),
    ).push(log);
    return {
      exitCode: StatusCode,
      stdout: Buffer.concat(out).toString(),
      stderr: Buffer.concat(err).toString(),
    };
  } finally {
    await container.remove({ force: true, v: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

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

    test('--plain: lines forged and 16 MiB written through /proc/1/fd/1 and /proc/1/fd/2 never reach the log; it holds the output limit', async () => {
      const r = await runPlain(await requireDocker(), INTO_LOG, runtime);
      const shown = (s: string): string => `${s.length} bytes: ${s.slice(0, 300)} … ${s.slice(-300)}`;
      assert.equal(r.exitCode, 3, shown(r.stderr));
      assert.doesNotMatch(r.stdout + r.stderr, /INJECTED|IIII/, shown(r.stdout));
      // Each stream within its limit, plus the runner's one line saying what it left out.
      assert.ok(r.stdout.length <= PLAIN_OUTPUT_BYTES + 64, shown(r.stdout));
      assert.equal(r.stderr, '');
      assert.match(
        r.stdout,
        /^real start\nchannel [^\n]*\no+\n\[sandpit: \d+ bytes not shown\]\no+\nreal end\n$/,
      );
      const said = /channel (.*)\n/.exec(r.stdout)?.[1];
      // runc: the kernel refuses the open. gVisor lets it open them, but they lead nowhere.
      assert.equal(said, refused ? '1:Permission denied 2:Permission denied' : '1:written 2:written');
    });
  });
}
