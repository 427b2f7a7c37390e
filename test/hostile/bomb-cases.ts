/**
 * Resource bombs (issue 21): hostile programs that try to exhaust what a sandbox has (processes,
 * threads, memory, disk, inodes, file descriptors, output, time) or to outlive it. Each bomb is a
 * named test that judges what the program saw from inside (fork failed with EAGAIN at the pids
 * limit, ENOSPC at the disk's size, …) and, from outside, that the run ended with the typed phase
 * and reason within a bound, the gateway still answers, nothing of the sandbox is left, and no
 * process of it survives on the host (under runc its processes are the host's, seen there while
 * it runs; under gVisor they live in the sandbox, which must be gone).
 *
 * Bombs that cannot disturb each other share a sandbox (bomb-programs.ts): a configuration costs
 * three (the memory bomb; the stragglers, the flood and the busy loop; the contained bombs, last,
 * which is also the run that must succeed after all the others), and a fourth where an inode fill
 * is stopped by the memory limit rather than an inode count. In a session configuration the
 * stragglers' exec runs in a session this file makes, so that what the session lists between the
 * exec's end and its deletion can be seen: a daemon outlives its exec there, as documented.
 *
 * The limits are small where the configuration is cold. A warm pool serves only its own shape (the
 * policy's defaults), so warm configurations run with those.
 */
import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import { after, before, describe, test } from 'node:test';
import type { Resources } from '../../src/api/run.js';
import { SHM_BYTES, tmpfsInodes } from '../../src/backends/hardening.js';
import { OPEN_FILES } from '../../src/policy/limits.js';
import type { Ceilings } from '../../src/policy/policy.js';
import { PRINCIPAL } from '../contract/target.js';
import {
  containedProgram,
  FLOOD_BYTES,
  INODE_BOMB,
  LONG_LINE_BYTES,
  MEMORY_BOMB,
  reportsOf,
  STRAGGLERS,
  stragglersProgram,
} from './bomb-programs.js';
import { HOSTILE_SANDBOX_CONFIG } from './gateway.js';
import { gatewayHealth, hostProcesses, leftoversAfter, rssGrowth, watch } from './outside.js';
import { configLabel, type HostileConfig, type Ran, type Untrusted } from './untrusted.js';

const MiB = 1024 ** 2;
const OUTPUT_BYTES = HOSTILE_SANDBOX_CONFIG.maxOutputBytes;

/** The test cluster's kubelet `podPidsLimit` (test/env/kube-cluster.sh): PIDs are per node on Kubernetes. */
const KUBE_POD_PIDS = 128;

/** The limits a configuration's bombs run under. */
interface Limits {
  resources: Resources | undefined;
  pids: number;
  memoryBytes: number;
  workspaceBytes: number;
  tmpBytes: number;
  fileSizeBytes: number;
}

function limitsFor(config: HostileConfig, ceilings: Ceilings): Limits {
  const kube = config.backend === 'kubernetes';
  const { tmpBytes } = ceilings;
  if (config.warm) {
    const workspaceBytes = ceilings.workspaceBytes;
    return {
      resources: undefined,
      pids: kube ? KUBE_POD_PIDS : ceilings.pids,
      memoryBytes: ceilings.memoryBytes,
      workspaceBytes,
      tmpBytes,
      fileSizeBytes: Math.max(workspaceBytes, tmpBytes),
    };
  }
  // Under gVisor on Kubernetes the program's processes are the pod's 128 (RLIMIT_NPROC), and
  // each costs the Sentry memory: they need the most a request may ask.
  const memoryBytes = kube && config.gvisor ? ceilings.memoryBytes : 256 * MiB;
  const pids = kube ? KUBE_POD_PIDS : 32;
  const workspaceBytes = 16 * MiB;
  return {
    resources: { memory: memoryBytes, ephemeralStorage: workspaceBytes, ...(kube ? {} : { pids }) },
    pids,
    memoryBytes,
    workspaceBytes,
    tmpBytes,
    fileSizeBytes: Math.max(workspaceBytes, tmpBytes),
  };
}

/**
 * Whether the workspace's inode count is its own limit: Docker and oci under runc mount it with
 * nr_inodes. gVisor's tmpfs ignores the option and a Kubernetes emptyDir cannot state it; there
 * every file is charged to the sandbox's memory, and the memory limit is what stops an inode fill.
 */
const inodeLimited = (config: HostileConfig): boolean => !config.gvisor && config.backend !== 'kubernetes';

/** The memory an inode fill runs into where memory is its limit, when cold: small, so that it ends soon even under gVisor. */
const INODE_BOMB_MEMORY = 64 * MiB;

/** Where stdout and stderr are one stream, reported as stdout: a Kubernetes run's pod log (< 1.32). */
const oneStream = (config: HostileConfig): boolean =>
  config.backend === 'kubernetes' && config.path === 'run';

/** How long after its deadline a timed-out run may end (the engine kills and reports). */
const DEADLINE_SLACK_MS = 10_000;

/** The stragglers' deadline: room for Python to start them and flood, before it spins. */
const deadlineSeconds = (config: HostileConfig): number => (config.gvisor ? 6 : 3);

/** How far the test process's memory may grow while a program writes 100 MiB through the gateway. */
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The resource bombs against `make()`'s target: the configuration's describe (`hostile: resource
 * bombs (<label>)`) with one test a bomb.
 */
export function bombCases(config: HostileConfig, make: () => Promise<Untrusted>): void {
  describe(`hostile: resource bombs (${configLabel(config)})`, () => {
    const marker = `sandpit-bomb-${process.pid}-${Date.now().toString(36)}`;
    const deadline = deadlineSeconds(config);
    let target: Untrusted;
    let limits: Limits;
    let resources: { resources?: Resources };
    before(async () => {
      target = await make();
      limits = limitsFor(config, target.service.policy.ceilings);
      resources = limits.resources ? { resources: limits.resources } : {};
    });
    after(() => target?.close());

    /** What every bomb's test checks from outside once its sandbox is done. */
    async function unharmed(): Promise<void> {
      const health = await gatewayHealth(target);
      assert.ok(health.ok, `the gateway's health after the bomb: ${health.detail}`);
      assert.deepEqual(await leftoversAfter(target), [], 'the sandbox is still there');
    }

    const exhausted = once(async () => {
      const t0 = performance.now();
      const r = await target.run({ code: MEMORY_BOMB, timeoutSeconds: 30, ...resources });
      return { r, wallMs: performance.now() - t0 };
    });

    const inodeBombed = once(async () => {
      // A gVisor pod's Sentry and gofer take much of a small limit before the program starts.
      const small =
        limits.resources && !(config.gvisor && config.backend === 'kubernetes')
          ? { resources: { ...limits.resources, memory: INODE_BOMB_MEMORY } }
          : resources;
      const t0 = performance.now();
      const r = await target.run({ code: INODE_BOMB, timeoutSeconds: 30, ...small });
      return { r, wallMs: performance.now() - t0 };
    });

    /**
     * The stragglers, the flood and the busy loop. In a session, the exec runs in a session made
     * here, and what the session lists after the exec (and the host shows, under runc) is taken
     * before it is deleted.
     */
    const spun = once(async () => {
      const code = stragglersProgram(marker);
      const t0 = performance.now();
      const seen = watch(() => hostProcesses(marker));
      try {
        if (config.path === 'run') {
          const { value: r, growthBytes } = await rssGrowth(() =>
            target.run({ code, timeoutSeconds: deadline, ...resources }),
          );
          return { r, growthBytes, wallMs: performance.now() - t0, seenOnHost: seen.stop().flat() };
        }
        const sessions = target.service.sessions;
        const runtime = config.gvisor
          ? { runtime: config.backend === 'kubernetes' ? 'gvisor' : 'runsc' }
          : {};
        const session = await sessions.create({ template: 'python', ...runtime, ...resources }, PRINCIPAL);
        try {
          await sessions.writeFile(session.id, PRINCIPAL, { path: 'main.py', content: Buffer.from(code) });
          const { value: r, growthBytes } = await rssGrowth(
            () =>
              sessions.exec(session.id, PRINCIPAL, {
                command: ['python3', 'main.py'],
                timeoutSeconds: deadline,
              }).result,
          );
          const wallMs = performance.now() - t0;
          // The exec's group is killed as it ends: its stubborn child may take a moment to go.
          const stubborn = (p: { command: string }) => p.command.includes(`${marker}-stubborn`);
          let listed = (await sessions.get(session.id, PRINCIPAL)).processes ?? [];
          for (let i = 0; i < 20 && listed.some(stubborn); i++) {
            await sleep(100);
            listed = (await sessions.get(session.id, PRINCIPAL)).processes ?? [];
          }
          return {
            r,
            growthBytes,
            wallMs,
            seenOnHost: seen.stop().flat(),
            listed,
            onHostAfterExec: hostProcesses(marker),
          };
        } finally {
          await sessions.delete(session.id, PRINCIPAL);
        }
      } finally {
        seen.stop();
      }
    });

    const contained = once(async () => {
      // Where the inode count is the limit, the fill is one of these bombs; elsewhere it has a sandbox of its own.
      const inodeCap = inodeLimited(config) ? 4 * tmpfsInodes(limits.workspaceBytes) : undefined;
      const { value: r, growthBytes } = await rssGrowth(() =>
        target.run({ code: containedProgram(inodeCap), timeoutSeconds: 30, ...resources }),
      );
      return { r, reports: reportsOf(r.stdout), growthBytes };
    });

    const report = (reports: Map<string, Record<string, unknown>[]>, name: string, r: Ran) => {
      const found = reports.get(name)?.[0];
      assert.ok(found, `the program never reported ${name}: ${summary(r)}`);
      assert.equal(found.broken, undefined, `the ${name} bomb itself broke: ${String(found.broken)}`);
      return found;
    };

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

    test('an output flood on both streams, binary, with no newline: summarised, counted exactly, the gateway’s memory bounded', async () => {
      const { r, growthBytes } = await spun();
      const [stdout, stderr] = oneStream(config) ? [2 * FLOOD_BYTES, 0] : [FLOOD_BYTES, FLOOD_BYTES];
      assert.equal(r.stdoutBytes, stdout, summary(r));
      assert.equal(r.stderrBytes, stderr, summary(r));
      assert.equal(r.binaryOutput, true);
      assert.equal(r.truncated, true);
      assert.equal(r.stdout, `[binary output: ${stdout} bytes, not shown]`);
      if (stderr) assert.equal(r.stderr, `[binary output: ${stderr} bytes, not shown]`);
      assert.ok(
        growthBytes < RSS_BOUND_BYTES,
        `the test process grew by ${(growthBytes / MiB).toFixed(0)} MiB while ${(2 * FLOOD_BYTES) / MiB} MiB went through`,
      );
      await unharmed();
    });

    /** The stragglers ran (the flood follows them), were seen on the host under runc, and are gone. */
    async function stragglersGone(roles: readonly string[]): Promise<void> {
      const { r, seenOnHost } = await spun();
      assert.equal(r.phase, 'TimedOut', summary(r));
      assert.equal(
        r.stdoutBytes + r.stderrBytes,
        2 * FLOOD_BYTES,
        `the program flooded only once all ${STRAGGLERS.length} ran: ${summary(r)}`,
      );
      if (!config.gvisor) {
        for (const role of roles)
          assert.ok(
            seenOnHost.some((p) => p.includes(`${marker}-${role}`)),
            `the ${role} child was never seen among the host's processes while it lasted`,
          );
      }
      await unharmed();
      const deadlineAt = Date.now() + 10_000;
      while (hostProcesses(marker).length && Date.now() < deadlineAt) await sleep(100);
      assert.deepEqual(hostProcesses(marker), [], 'a straggler survived its sandbox on the host');
    }

    test('a sleep-forever child that ignores SIGTERM: the run still ends at its deadline, and the child is gone', async () => {
      const spin = await spun();
      if (config.path === 'session') {
        // It is in its exec's process group: that goes when the exec ends, not with the session.
        assert.ok(
          !spin.listed?.some((p) => p.command.includes(`${marker}-stubborn`)),
          `the exec's own child outlived it: ${JSON.stringify(spin.listed)}`,
        );
        assert.ok(
          !spin.onHostAfterExec?.some((p) => p.includes(`${marker}-stubborn`)),
          'it is on the host after its exec',
        );
      }
      await stragglersGone(['stubborn']);
    });

    test(
      config.path === 'session'
        ? 'a double-forked daemon and a setsid child that try to outlive the exec: they do, as documented (the session lists them), and go with the session'
        : 'a double-forked daemon and a setsid child that try to outlive the run: gone after it',
      async () => {
        const spin = await spun();
        if (config.path === 'session') {
          for (const role of ['daemon', 'setsid']) {
            assert.ok(
              spin.listed?.some((p) => p.command.includes(`${marker}-${role}`)),
              `the session does not list its ${role}: ${JSON.stringify(spin.listed)}`,
            );
            if (!config.gvisor)
              assert.ok(
                spin.onHostAfterExec?.some((p) => p.includes(`${marker}-${role}`)),
                `the ${role} is not on the host after its exec`,
              );
          }
          const ended = await target.service.sessions.list(PRINCIPAL);
          assert.ok(
            !ended.some((s) => s.state === 'Ready'),
            `a session is still live: ${JSON.stringify(ended.map((s) => [s.id, s.state]))}`,
          );
        }
        await stragglersGone(['daemon', 'setsid']);
      },
    );

    test('an inode fill: creating empty files in the workspace ends at a limit of the sandbox (ENOSPC at its inode count; where a tmpfs has none, under gVisor and on Kubernetes, OOMKilled at its memory limit, or under gVisor with 512 MiB, its deadline)', async () => {
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
        assert.ok(
          progress.every((p) => p.error === undefined),
          `the fill ended by itself, not by the memory limit: ${JSON.stringify(progress.at(-1))}`,
        );
        // With 512 MiB (a warm pool's, or a gVisor pod's) gVisor makes files too slowly to fill it
        // before the deadline, which then ends the fill.
        const stoppedBy = config.gvisor ? ['OOMKilled', 'DeadlineExceeded'] : ['OOMKilled'];
        assert.ok(stoppedBy.includes(r.reason ?? ''), summary(r));
        assert.ok(wallMs < 60_000, `the fill took ${wallMs.toFixed(0)} ms`);
      }
      await unharmed();
    });

    test('a fork bomb: starting processes fails with EAGAIN at the pids limit, and no more processes exist at once', async () => {
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

    test('a disk fill of every writable path (/tmp and $HOME, the workspace, /dev/shm; the message queues; on Kubernetes the termination log): each stopped at its limit, none on the host’s disk but the fsize-bound termination log', async () => {
      const { r, reports } = await contained();
      const writable = report(reports, 'writable', r);
      const mounts = writable.mounts as Record<string, string>;
      const tmpfs: Record<string, number> = {
        '/tmp': limits.tmpBytes,
        '/workspace': limits.workspaceBytes,
        '/dev/shm': SHM_BYTES,
      };
      // Under runc the IPC namespace's message queues are a file system too (gVisor shows none);
      // on Kubernetes the kubelet mounts the termination log, where the runner writes its report.
      const others = ['/dev/mqueue', ...(config.backend === 'kubernetes' ? ['/dev/termination-log'] : [])];
      const unexpected = Object.keys(mounts).filter((m) => !(m in tmpfs) && !others.includes(m));
      assert.deepEqual(unexpected, [], `writable mounts nobody expects: ${JSON.stringify(mounts)}`);
      for (const path of Object.keys(tmpfs))
        assert.ok(path in mounts, `${path} is not writable: ${JSON.stringify(mounts)}`);
      assert.equal(writable.home, '/tmp', '$HOME is in /tmp');
      assert.equal(writable.cwd, '/workspace', 'the program starts in the workspace');
      const fills = reports.get('fill') ?? [];
      const fillOf = (path: string) => {
        const fill = fills.find((f) => f.path === path);
        assert.ok(fill, `${path} was not filled: ${summary(r)}`);
        assert.equal(fill.broken, undefined, `the fill of ${path} broke: ${String(fill.broken)}`);
        return fill;
      };
      // Under gVisor on Kubernetes an emptyDir is the kubelet's directory served by the gofer
      // (9p): its medium is memory, a host tmpfs of the size limit, which ENOSPC at that size shows.
      const memoryFs = config.gvisor && config.backend === 'kubernetes' ? '9p' : 'tmpfs';
      for (const [path, bound] of Object.entries(tmpfs)) {
        const fill = fillOf(path);
        assert.equal(
          fill.fstype,
          memoryFs,
          `${path} is memory, never the host's disk: ${JSON.stringify(fill)}`,
        );
        assert.equal(fill.error, 'ENOSPC', `${path}: ${JSON.stringify(fill)}`);
        const [written, size] = [Number(fill.written), Number(fill.size)];
        assert.ok(size > 0 && size <= bound, `${path} is ${size} bytes, over its limit of ${bound}`);
        assert.ok(written <= size && written >= size - 2 * MiB, `${path}: wrote ${written} of ${size} bytes`);
      }
      if ('/dev/mqueue' in mounts) {
        const mq = fillOf('/dev/mqueue');
        // RLIMIT_MSGQUEUE (800 KiB of queues a user) or the namespace's queues_max (256) stops it.
        assert.ok(['EMFILE', 'ENOSPC', 'ENOMEM'].includes(String(mq.error)), JSON.stringify(mq));
        assert.ok(Number(mq.created) <= 256, `${String(mq.created)} message queues`);
      }
      if ('/dev/termination-log' in mounts) {
        // A file on the node's disk (the kubelet's): the fsize ulimit bounds it, and the pod's removal frees it.
        const log = fillOf('/dev/termination-log');
        assert.equal(log.error, 'EFBIG', JSON.stringify(log));
        assert.ok(Number(log.written) <= limits.fileSizeBytes, JSON.stringify(log));
      }
      await unharmed();
    });

    test(`very long lines (${LONG_LINE_BYTES / MiB} MiB on each stream): kept head and tail, counted exactly, the gateway's memory bounded`, async () => {
      const { r, growthBytes } = await contained();
      assert.equal(r.phase, 'Succeeded', summary(r));
      const head = r.stdout.indexOf('xxxxxxxx');
      assert.ok(head > 0, `no long line in stdout: ${r.stdout.slice(0, 300)}`);
      // One stream keeps each stream's order, not their order to each other: a piece of the stderr
      // line may come before the stdout line starts, and either line may end it.
      const early = (r.stdout.slice(0, head).match(/e{64,}/g) ?? []).join('').length;
      const streams = oneStream(config)
        ? ([['stdout', r.stdout, r.stdoutBytes, head - early + 2 * (LONG_LINE_BYTES + 1), 'xe']] as const)
        : ([
            ['stdout', r.stdout, r.stdoutBytes, head + LONG_LINE_BYTES + 1, 'x'],
            ['stderr', r.stderr, r.stderrBytes, LONG_LINE_BYTES + 1, 'e'],
          ] as const);
      for (const [name, text, bytes, expected, last] of streams) {
        assert.equal(
          bytes,
          expected,
          `every byte of ${name} counted (the long line at ${head}): ${JSON.stringify(text.slice(0, 300))}`,
        );
        assert.ok(
          text.includes(`\n[… ${bytes - OUTPUT_BYTES} bytes truncated …]\n`),
          `${name} says what it cut`,
        );
        assert.ok(
          [...last].some((c) => text.endsWith(`${c.repeat(64)}\n`)),
          `${name} keeps the line's end: it ends ${JSON.stringify(text.slice(-160))}`,
        );
        assert.ok(text.length < 2 * OUTPUT_BYTES, `${name} is ${text.length} characters`);
      }
      assert.equal(r.truncated, true);
      assert.equal(r.binaryOutput, false);
      assert.ok(
        growthBytes < RSS_BOUND_BYTES,
        `the test process grew by ${(growthBytes / MiB).toFixed(0)} MiB while 100 MiB of lines went through`,
      );
      await unharmed();
    });

    test('afterwards (the contained bombs ran last): the run after every other bomb succeeded, the gateway answers, and nothing is left', async () => {
      const { r } = await contained();
      assert.equal(r.phase, 'Succeeded', summary(r));
      assert.equal(r.exitCode, 0);
      await unharmed();
      assert.deepEqual(hostProcesses(marker), []);
    });
  });
}
