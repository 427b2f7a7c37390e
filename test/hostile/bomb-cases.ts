/**
 * Resource bombs (issue 21): hostile programs that try to exhaust what a sandbox has (processes,
 * threads, memory, disk, inodes, file descriptors, output, time) or to outlive it. Each bomb is a
 * named test that judges what the program saw from inside (fork failed with EAGAIN at the pids
 * limit, ENOSPC at the disk's size, …) and, from outside, that the run ended with the typed phase
 * and reason within a bound, the gateway still answers, nothing of the sandbox is left, and no
 * process of it survives on the host (under runc its processes are the host's; under gVisor they
 * live in the sandbox, which must be gone). Bombs that cannot disturb each other share a sandbox
 * (bomb-programs.ts): the catalogue costs five sandboxes a configuration (six where an inode fill
 * is stopped by the memory limit).
 *
 * The limits are small where the configuration is cold. A warm pool serves only its own shape (the
 * policy's defaults), so warm configurations run with those.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Resources } from '../../src/api/run.js';
import { OPEN_FILES } from '../../src/policy/limits.js';
import { DEFAULT_CEILINGS } from '../../src/policy/policy.js';
import { SHM_BYTES, tmpfsInodes } from '../../src/backends/hardening.js';
import { PRINCIPAL } from '../contract/target.js';
import {
  containedProgram,
  FLOOD_BYTES,
  floodProgram,
  INODE_BOMB,
  LONG_LINE_BYTES,
  MEMORY_BOMB,
  reportsOf,
  STRAGGLERS,
  stragglersProgram,
} from './bomb-programs.js';
import { gatewayHealth, hostProcesses, leftoversAfter, rssGrowth, watch } from './outside.js';
import { HOSTILE_OUTPUT_BYTES } from './gateway.js';
import { configLabel, type HostileConfig, type Ran, type Untrusted } from './untrusted.js';

const MiB = 1024 ** 2;

/** The test cluster's kubelet `podPidsLimit` (test/env/kube-cluster.sh): PIDs are per node on Kubernetes. */
const KUBE_POD_PIDS = 128;

/** The limits a configuration's bombs run under. */
interface Limits {
  resources: Resources | undefined;
  pids: number;
  memoryBytes: number;
  workspaceBytes: number;
  tmpBytes: number;
}

function limitsFor(config: HostileConfig): Limits {
  const kube = config.backend === 'kubernetes';
  if (config.warm) {
    return {
      resources: undefined,
      pids: kube ? KUBE_POD_PIDS : DEFAULT_CEILINGS.pids,
      memoryBytes: DEFAULT_CEILINGS.memoryBytes,
      workspaceBytes: DEFAULT_CEILINGS.workspaceBytes,
      tmpBytes: DEFAULT_CEILINGS.tmpBytes,
    };
  }
  const pids = kube ? KUBE_POD_PIDS : 32;
  return {
    resources: { memory: '256m', ephemeralStorage: '16m', ...(kube ? {} : { pids }) },
    pids,
    memoryBytes: 256 * MiB,
    workspaceBytes: 16 * MiB,
    tmpBytes: DEFAULT_CEILINGS.tmpBytes,
  };
}

/**
 * Whether the workspace's inode count is its own limit: Docker and oci under runc mount it with
 * nr_inodes. gVisor's tmpfs ignores the option and a Kubernetes emptyDir cannot state it; there
 * every file is charged to the sandbox's memory, and the memory limit is what stops an inode fill.
 */
const inodeLimited = (config: HostileConfig): boolean => !config.gvisor && config.backend !== 'kubernetes';

/**
 * The memory an inode fill runs into where memory is its limit: small where the configuration is
 * cold, so that it ends soon even under gVisor (whose file creation is slow).
 */
const INODE_BOMB_MEMORY = '64m';

/** How long after its deadline a timed-out run may end (the engine kills and reports). */
const DEADLINE_SLACK_MS = 10_000;

/** The deadline of the program that spins past it: enough for Python to start its children first. */
const deadlineSeconds = (config: HostileConfig): number => (config.gvisor ? 4 : 2);

/** How far the test process's memory may grow while a program writes 100 MB through the gateway. */
const RSS_BOUND_BYTES = 48 * MiB;

/** A run's outcome and output, said short for assertion messages. */
function summary(r: Ran): string {
  return `${r.phase}/${r.reason ?? ''} exit ${r.exitCode}: ${r.message ?? ''} stdout ${r.stdout.slice(0, 600)} stderr ${r.stderr.slice(0, 600)}`;
}

/** A memoised async step: the first test that needs a sandbox runs it, the others read its result. */
function once<T>(step: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= step());
}

/**
 * The resource bombs against `make()`'s target: the configuration's describe (`hostile: resource
 * bombs (<label>)`) with one test a bomb.
 */
export function bombCases(config: HostileConfig, make: () => Promise<Untrusted>): void {
  describe(`hostile: resource bombs (${configLabel(config)})`, () => {
    const limits = limitsFor(config);
    const resources = limits.resources ? { resources: limits.resources } : {};
    const marker = `sandpit-bomb-${process.pid}-${Date.now().toString(36)}`;
    let target: Untrusted;
    before(async () => {
      target = await make();
    });
    after(() => target?.close());

    /** What every bomb's test checks from outside once its sandbox is done. */
    async function unharmed(): Promise<void> {
      const health = await gatewayHealth(target);
      assert.ok(health.ok, `the gateway's health after the bomb: ${health.detail}`);
      assert.deepEqual(await leftoversAfter(target), [], 'the sandbox is still there');
    }

    const contained = once(async () => {
      // Where the inode count is the limit, the fill is one of these bombs; elsewhere it has a sandbox of its own.
      const inodeCap = inodeLimited(config) ? 4 * tmpfsInodes(limits.workspaceBytes) : undefined;
      const { value: r, growthBytes } = await rssGrowth(() =>
        target.run({ code: containedProgram(inodeCap), timeoutSeconds: 30, ...resources }),
      );
      return { r, reports: reportsOf(r.stdout), growthBytes };
    });

    const flooded = once(async () => {
      const { value: r, growthBytes } = await rssGrowth(() =>
        target.run({ code: floodProgram(), timeoutSeconds: 30, ...resources }),
      );
      return { r, growthBytes };
    });

    const exhausted = once(async () => {
      const t0 = performance.now();
      const r = await target.run({ code: MEMORY_BOMB, timeoutSeconds: 30, ...resources });
      return { r, wallMs: performance.now() - t0 };
    });

    const inodeBombed = once(async () => {
      const small = limits.resources ? { resources: { ...limits.resources, memory: INODE_BOMB_MEMORY } } : {};
      const t0 = performance.now();
      const r = await target.run({ code: INODE_BOMB, timeoutSeconds: 30, ...small });
      return { r, wallMs: performance.now() - t0 };
    });

    const deadline = deadlineSeconds(config);
    const spun = once(async () => {
      const t0 = performance.now();
      // Under runc the stragglers are the host's processes: seen there while the run lasts.
      const seen = watch(() => hostProcesses(marker));
      try {
        const r = await target.run({
          code: stragglersProgram(marker, true),
          timeoutSeconds: deadline,
          ...resources,
        });
        return { r, wallMs: performance.now() - t0, seenOnHost: seen.stop().flat() };
      } finally {
        seen.stop();
      }
    });

    const report = (reports: Map<string, Record<string, unknown>[]>, name: string, r: Ran) => {
      const found = reports.get(name)?.[0];
      assert.ok(found, `the program never reported ${name}: ${summary(r)}`);
      assert.equal(found.broken, undefined, `the ${name} bomb itself broke: ${String(found.broken)}`);
      return found;
    };

    test('a fork bomb: fork fails with EAGAIN at the pids limit, and no more processes exist at once', async () => {
      const { r, reports } = await contained();
      const fork = report(reports, 'fork', r);
      assert.equal(fork.error, 'EAGAIN', JSON.stringify(fork));
      const spawned = Number(fork.spawned);
      assert.ok(
        spawned < limits.pids && spawned >= limits.pids - 16,
        `forked ${spawned} under a limit of ${limits.pids}`,
      );
      assert.ok(Number(fork.visible) <= limits.pids, `${String(fork.visible)} processes visible at once`);
      await unharmed();
    });

    test('a thread bomb: pthread_create fails with EAGAIN at the pids limit', async () => {
      const { r, reports } = await contained();
      const threads = report(reports, 'thread', r);
      assert.equal(threads.error, 'EAGAIN', JSON.stringify(threads));
      const n = Number(threads.threads);
      assert.ok(
        n < limits.pids && n >= limits.pids - 16,
        `started ${n} threads under a limit of ${limits.pids}`,
      );
      await unharmed();
    });

    test(`file-descriptor exhaustion: open fails with EMFILE at the nofile limit (${OPEN_FILES})`, async () => {
      const { r, reports } = await contained();
      const fd = report(reports, 'fd', r);
      assert.equal(fd.error, 'EMFILE', JSON.stringify(fd));
      assert.equal(fd.limit, OPEN_FILES);
      const opened = Number(fd.opened);
      assert.ok(opened < OPEN_FILES && opened >= OPEN_FILES - 16, `opened ${opened} under ${OPEN_FILES}`);
      await unharmed();
    });

    test('a disk fill of every writable path (/tmp and $HOME, the workspace, /dev/shm): each a tmpfs, each stopped with ENOSPC at its size', async () => {
      const { r, reports } = await contained();
      const writable = report(reports, 'writable', r);
      const mounts = writable.mounts as Record<string, string>;
      const bounds: Record<string, number> = {
        '/tmp': limits.tmpBytes,
        '/workspace': limits.workspaceBytes,
        '/dev/shm': SHM_BYTES,
      };
      // Under runc the IPC namespace's message queues are a file system too (gVisor shows none).
      const others = Object.keys(mounts).filter((m) => !(m in bounds));
      assert.deepEqual(
        [
          ...Object.keys(mounts)
            .filter((m) => m in bounds)
            .sort(),
          ...others.filter((m) => m !== '/dev/mqueue'),
        ],
        Object.keys(bounds).sort(),
        `the writable mounts: ${JSON.stringify(mounts)}`,
      );
      assert.equal(writable.home, '/tmp', '$HOME is in /tmp');
      assert.equal(writable.cwd, '/workspace', 'the program starts in the workspace');
      const fills = reports.get('fill') ?? [];
      if ('/dev/mqueue' in mounts) {
        const mq = fills.find((f) => f.path === '/dev/mqueue');
        assert.ok(mq && mq.fstype === 'mqueue', `/dev/mqueue: ${JSON.stringify(mq)}`);
        // RLIMIT_MSGQUEUE (800 KiB of queues a user) or the namespace's queues_max (256) stops it.
        assert.ok(['EMFILE', 'ENOSPC', 'ENOMEM'].includes(String(mq.error)), JSON.stringify(mq));
        assert.ok(Number(mq.created) <= 256, `${String(mq.created)} message queues`);
      }
      for (const [path, bound] of Object.entries(bounds)) {
        const fill = fills.find((f) => f.path === path);
        assert.ok(fill, `${path} was not filled: ${summary(r)}`);
        assert.equal(fill.broken, undefined, `the fill of ${path} broke: ${String(fill.broken)}`);
        assert.equal(
          fill.fstype,
          'tmpfs',
          `${path} is memory, never the host's disk: ${JSON.stringify(fill)}`,
        );
        assert.equal(fill.error, 'ENOSPC', `${path}: ${JSON.stringify(fill)}`);
        const [written, size] = [Number(fill.written), Number(fill.size)];
        assert.ok(size > 0 && size <= bound, `${path} is ${size} bytes, over its limit of ${bound}`);
        assert.ok(written <= size && written >= size - 2 * MiB, `${path}: wrote ${written} of ${size} bytes`);
      }
      await unharmed();
    });

    test('an inode fill: creating empty files in the workspace ends at a limit of the sandbox (ENOSPC at its inode count; where a tmpfs has none, under gVisor and on Kubernetes, OOMKilled at its memory limit)', async () => {
      if (inodeLimited(config)) {
        const { r, reports } = await contained();
        const inode = report(reports, 'inode', r);
        assert.equal(inode.error, 'ENOSPC', JSON.stringify(inode));
        const count = tmpfsInodes(limits.workspaceBytes);
        assert.equal(inode.inodes, count, `the workspace's inode count: ${JSON.stringify(inode)}`);
        assert.ok(Number(inode.files) < count, JSON.stringify(inode));
      } else {
        const { r, wallMs } = await inodeBombed();
        const progress = reportsOf(r.stdout).get('inodes') ?? [];
        assert.ok(progress.length > 0, `the fill never got to 5,000 files: ${summary(r)}`);
        assert.equal(r.phase, 'Failed', summary(r));
        assert.equal(r.reason, 'OOMKilled', summary(r));
        assert.ok(wallMs < 60_000, `the fill took ${wallMs.toFixed(0)} ms`);
      }
      await unharmed();
    });

    test(`very long lines (${LONG_LINE_BYTES / MiB} MiB on each stream): kept head and tail, counted exactly, the gateway's memory bounded`, async () => {
      const { r, growthBytes } = await contained();
      assert.equal(r.phase, 'Succeeded', summary(r));
      const head = r.stdout.indexOf('xxxxxxxx');
      assert.ok(head > 0, `no long line in stdout: ${r.stdout.slice(0, 300)}`);
      assert.equal(r.stdoutBytes, head + LONG_LINE_BYTES + 1, 'every byte of stdout counted');
      assert.equal(r.stderrBytes, LONG_LINE_BYTES + 1, 'every byte of stderr counted');
      assert.equal(r.truncated, true);
      assert.equal(r.binaryOutput, false);
      for (const [name, text, bytes, ch] of [
        ['stdout', r.stdout, r.stdoutBytes, 'x'],
        ['stderr', r.stderr, r.stderrBytes, 'e'],
      ] as const) {
        const cut = bytes - HOSTILE_OUTPUT_BYTES;
        assert.ok(text.includes(`\n[… ${cut} bytes truncated …]\n`), `${name} says what it cut`);
        assert.ok(text.endsWith(`${ch.repeat(64)}\n`), `${name} keeps the line's end`);
        assert.ok(text.length < 2 * HOSTILE_OUTPUT_BYTES, `${name} is ${text.length} characters`);
      }
      assert.ok(
        growthBytes < RSS_BOUND_BYTES,
        `the test process grew by ${(growthBytes / MiB).toFixed(0)} MiB while 100 MiB of lines went through`,
      );
      await unharmed();
    });

    test('an output flood on both streams, binary, with no newline: summarised, counted exactly, the gateway’s memory bounded', async () => {
      const { r, growthBytes } = await flooded();
      assert.equal(r.phase, 'Succeeded', summary(r));
      assert.equal(r.stdoutBytes, FLOOD_BYTES, summary(r));
      assert.equal(r.stderrBytes, FLOOD_BYTES, summary(r));
      assert.equal(r.binaryOutput, true);
      assert.equal(r.truncated, true);
      assert.equal(r.stdout, `[binary output: ${FLOOD_BYTES} bytes, not shown]`);
      assert.equal(r.stderr, `[binary output: ${FLOOD_BYTES} bytes, not shown]`);
      assert.ok(
        growthBytes < RSS_BOUND_BYTES,
        `the test process grew by ${(growthBytes / MiB).toFixed(0)} MiB while ${(2 * FLOOD_BYTES) / MiB} MiB went through`,
      );
      await unharmed();
    });

    test('a memory bomb: killed at the memory limit, Failed with reason OOMKilled', async () => {
      const { r, wallMs } = await exhausted();
      assert.equal(r.phase, 'Failed', summary(r));
      assert.equal(r.reason, 'OOMKilled', summary(r));
      assert.equal(r.exitCode, 137, summary(r));
      assert.equal(r.timedOut, false);
      if (r.limits) assert.equal(r.limits.memoryBytes, limits.memoryBytes);
      assert.ok(wallMs < 30_000, `the run took ${wallMs.toFixed(0)} ms, its deadline is 30 s`);
      await unharmed();
    });

    test('a busy loop past the deadline: TimedOut (DeadlineExceeded, timedOut true), ended within its deadline and a bound', async () => {
      const { r } = await spun();
      assert.equal(r.phase, 'TimedOut', summary(r));
      assert.equal(r.reason, 'DeadlineExceeded', summary(r));
      assert.equal(r.timedOut, true);
      assert.ok(
        r.durationMs >= deadline * 1000 && r.durationMs <= deadline * 1000 + DEADLINE_SLACK_MS,
        `ended after ${r.durationMs} ms with a deadline of ${deadline} s`,
      );
      await unharmed();
    });

    const stragglers = async (roles: readonly string[]) => {
      const { r, seenOnHost } = await spun();
      const started = report(reportsOf(r.stdout), 'stragglers', r);
      const running = started.running as Record<string, number>;
      assert.deepEqual(Object.keys(running).sort(), [...STRAGGLERS].sort(), 'all three were running');
      if (!config.gvisor) {
        for (const role of roles)
          assert.ok(
            seenOnHost.some((p) => p.includes(`${marker}-${role}`)),
            `the ${role} child was never seen among the host's processes while the run lasted`,
          );
      }
      await unharmed();
      assert.deepEqual(hostProcesses(marker), [], 'a straggler survived its sandbox on the host');
    };

    test('a sleep-forever child that ignores SIGTERM: the run still ends at its deadline, and the child is gone', async () => {
      const { r } = await spun();
      assert.equal(r.phase, 'TimedOut', summary(r));
      await stragglers(['stubborn']);
    });

    test('a double-forked daemon and a setsid child that try to outlive the run: gone after it', async () => {
      await stragglers(['daemon', 'setsid']);
    });

    if (config.path === 'session') {
      test('in a session, a double-forked daemon and a setsid child outlive their exec (the session lists them) and end with the session', async () => {
        const sessions = target.service.sessions;
        const runtime = config.gvisor
          ? { runtime: config.backend === 'kubernetes' ? 'gvisor' : 'runsc' }
          : {};
        const session = await sessions.create({ template: 'python', ...runtime }, PRINCIPAL);
        const daemonMarker = `${marker}-session`;
        try {
          await sessions.writeFile(session.id, PRINCIPAL, {
            path: 'stragglers.py',
            content: Buffer.from(stragglersProgram(daemonMarker, false)),
          });
          const exec = await sessions.exec(session.id, PRINCIPAL, {
            command: ['python3', 'stragglers.py'],
            timeoutSeconds: 20,
          }).result;
          assert.equal(exec.phase, 'Succeeded', summary(exec));
          // The exec's own group is killed as its leader exits: its child may take a moment to go.
          const isStubborn = (p: { command: string }) => p.command.includes(`${daemonMarker}-stubborn`);
          let listed = (await sessions.get(session.id, PRINCIPAL)).processes ?? [];
          for (let i = 0; i < 20 && listed.some(isStubborn); i++) {
            await new Promise((r) => setTimeout(r, 100));
            listed = (await sessions.get(session.id, PRINCIPAL)).processes ?? [];
          }
          for (const role of ['daemon', 'setsid'])
            assert.ok(
              listed.some((p) => p.command.includes(`${daemonMarker}-${role}`)),
              `the session does not list its ${role}: ${JSON.stringify(listed)}`,
            );
          assert.ok(!listed.some(isStubborn), `the exec's own child outlived it: ${JSON.stringify(listed)}`);
          if (!config.gvisor) {
            const onHost = hostProcesses(daemonMarker);
            for (const role of ['daemon', 'setsid'])
              assert.ok(
                onHost.some((p) => p.includes(`${daemonMarker}-${role}`)),
                `${role} is not on the host`,
              );
          }
        } finally {
          await sessions.delete(session.id, PRINCIPAL);
        }
        const ended = await sessions.get(session.id, PRINCIPAL);
        assert.notEqual(ended.state, 'Ready', `the deleted session is ${ended.state}`);
        const deadlineAt = Date.now() + 10_000;
        while (hostProcesses(daemonMarker).length && Date.now() < deadlineAt)
          await new Promise((r) => setTimeout(r, 100));
        assert.deepEqual(hostProcesses(daemonMarker), [], 'a daemon survived its session');
        await unharmed();
      });
    }

    test('afterwards: the gateway answers, a small run succeeds, and nothing is left', async () => {
      const r = await target.run({ code: 'print("still here")', timeoutSeconds: 30 });
      assert.equal(r.phase, 'Succeeded', summary(r));
      assert.equal(r.stdout, 'still here\n');
      await unharmed();
      assert.deepEqual(hostProcesses(marker), []);
    });
  });
}
