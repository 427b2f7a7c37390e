// What a SandboxRun can put on its node (issue 11, item 2), and what its kernel surface is (io_uring),
// checked on the real cluster and on the node itself (this machine): the program tries to write
// 1 GiB to its log, its termination message and its workspace (and /tmp), and 256 MiB and a forged
// line to each of the runner's stdout and stderr through /proc/1/fd (which gVisor lets it open);
// the pod log, the termination message, the node's files and mounts show what reached the node.
// The flood runs under runc and under the gvisor RuntimeClass.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { parseExitReport } from '../../../src/runner/protocol.js';
import {
  createRun,
  operatorSuite,
  podsOf,
  sandboxRun,
  waitForFinished,
  waitForPhase,
} from './operator-harness.js';

const MiB = 1024 ** 2;
/** The policy's defaults: output 1 MiB (head and tail), workspace and /tmp 64 MiB, memory 512 MiB. */
const OUTPUT_BYTES = MiB;
const VOLUME_BYTES = 64 * MiB;
const MEMORY_BYTES = 512 * MiB;
/** The kubelet reads at most this much of a termination message. */
const TERMINATION_MESSAGE_MAX = 4096;

const FLOOD = [
  'import errno, os, sys, time',
  'GiB, chunk = 1 << 30, b"x" * (1 << 20)',
  // the runner's own stdout and stderr: the pod log, unless they lead nowhere
  'said = []',
  'for n in (1, 2):',
  '    try:',
  '        fd = os.open(f"/proc/1/fd/{n}", os.O_WRONLY)',
  '        os.write(fd, b"\\nINJECTED: a line the runner never wrote\\n")',
  '        for _ in range(256): os.write(fd, b"I" * len(chunk))',
  '        said.append(f"{n}:written")',
  '    except OSError as e:',
  '        said.append(f"{n}:{errno.errorcode.get(e.errno, e.errno)}")',
  'def fill(paths):',
  '    n = 0',
  '    try:',
  '        for p in paths:',
  '            with open(p, "wb", buffering=0) as f:',
  '                while n < GiB and f.tell() < 8 * len(chunk):',
  '                    n += f.write(chunk)',
  '            if n >= GiB: break',
  '    except OSError as e:',
  '        return n, errno.errorcode.get(e.errno, e.errno)',
  '    return n, "none"',
  'out = sys.stdout.buffer',
  'for _ in range(1024): out.write(chunk)',
  'out.flush()',
  // RLIMIT_FSIZE: one file, however it is reached
  'def one(path):',
  '    n = 0',
  '    try:',
  '        with open(path, "wb", buffering=0) as f:',
  '            while n < GiB: n += f.write(chunk)',
  '    except OSError as e:',
  '        return n, errno.errorcode.get(e.errno, e.errno)',
  '    return n, "none"',
  'print("\\nchannel", *said, flush=True)',
  'term = one("/dev/termination-log")',
  'print("\\ntermination-log", *term, flush=True)',
  // many files of 8 MiB: the filesystem's own bound, not the file-size limit
  'ws = fill(f"/workspace/f{i}" for i in range(1024))',
  'print("workspace", *ws, flush=True)',
  'tmp = fill(f"/tmp/f{i}" for i in range(1024))',
  'print("tmp", *tmp, flush=True)',
  'time.sleep(3)',
].join('\n');

const run = promisify(execFile);

/** The host's mount of a pod's emptyDir volume: its filesystem type and options, or undefined. */
function volumeMount(
  kubeletRoot: string,
  podUid: string,
  volume: string,
): { type: string; options: string } | undefined {
  const target = path.join(kubeletRoot, 'pods', podUid, 'volumes', 'kubernetes.io~empty-dir', volume);
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    if (left.split(' ')[4] !== target) continue;
    const [type = '', , options = ''] = right.split(' ');
    return { type, options };
  }
  return undefined;
}

/** Bytes on disk under `dir`, on its own filesystem only (a tmpfs mounted below does not count). */
async function diskBytes(dir: string): Promise<number> {
  const { stdout } = await run('du', ['-sxb', dir]);
  return Number(stdout.split('\t')[0]);
}

/** The pod's container log files on the node (CRI: /var/log/pods/<ns>_<name>_<uid>/<container>/). */
function nodeLogBytes(pod: V1Pod): number {
  const dir = `/var/log/pods/${pod.metadata?.namespace}_${pod.metadata?.name}_${pod.metadata?.uid}/sandbox`;
  return readdirSync(dir).reduce((sum, f) => sum + statSync(path.join(dir, f)).size, 0);
}

const GVISOR = 'gvisor';

describe('what a SandboxRun can put on its node', { timeout: 600_000 }, () => {
  const ops = operatorSuite('operator-node-limits', {
    kubernetes: { allowedRuntimeClasses: [GVISOR, 'runc'] },
  });
  const { it } = ops;

  for (const runtimeClassName of [undefined, GVISOR]) {
    const name = runtimeClassName ? `flood-${runtimeClassName}` : 'flood';
    it(`${runtimeClassName ?? 'runc'}: 1 GiB to the log, 512 MiB and a forged line through /proc/1/fd, the termination message and the workspace: the node keeps the output limit, a bounded message, and no workspace on disk`, async () => {
      const { cluster, ns } = ops.suite;
      const kubeletRoot = path.join(cluster.env.stateDir, 'kubelet');
      await createRun(
        cluster,
        ns,
        sandboxRun(name, {
          template: 'python',
          code: FLOOD,
          timeoutSeconds: 30,
          ...(runtimeClassName ? { runtimeClassName } : {}),
        }),
      );
      const running = await waitForPhase(cluster, ns, name, 'Running', 60_000);
      const [live] = await podsOf(ops.suite, running);
      assert.ok(live?.metadata?.uid, 'the run has a pod');
      // While it runs: the workspace and /tmp are tmpfs on the node, not directories on its disk.
      const mounts = ['workspace', 'tmp'].map((v) => volumeMount(kubeletRoot, live.metadata!.uid!, v));
      for (const m of mounts) assert.equal(m?.type, 'tmpfs', JSON.stringify(mounts));
      // SizeMemoryBackedVolumes (on from v1.22; the test cluster's kubelet turns it on) sizes each by its sizeLimit.
      const sized = mounts.every((m) => /(^|,)size=65536k(,|$)/.test(m?.options ?? ''));

      const done = await waitForFinished(cluster, ns, name, 120_000);
      const [pod] = await podsOf(ops.suite, done);
      assert.ok(pod);
      assert.equal(pod.spec?.runtimeClassName, runtimeClassName);
      const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
      assert.ok(terminated, JSON.stringify(pod.status));

      // The log: the runner forwards the head and keeps the tail, 1 MiB in all, plus its one note;
      // nothing the program wrote into the runner's stdout or stderr.
      const log = await cluster.podLog(ns, pod.metadata!.name!);
      assert.ok(log.length <= OUTPUT_BYTES + 4096, `pod log of ${log.length} bytes`);
      assert.match(log, /\[sandpit: \d+ bytes not shown\]/);
      assert.doesNotMatch(log, /INJECTED|IIII/);
      const onNode = nodeLogBytes(pod);
      assert.ok(onNode <= 2 * OUTPUT_BYTES, `${onNode} bytes of container log on the node`);

      // The termination message is the runner's exit report, written last: bounded, and true.
      const message = terminated.message ?? '';
      assert.ok(message.length <= TERMINATION_MESSAGE_MAX);
      const report = parseExitReport(message);
      assert.ok(report.stdoutBytes >= 1024 * MiB, `the program wrote ${report.stdoutBytes} bytes of output`);
      const files = path.join(kubeletRoot, 'pods', pod.metadata!.uid!, 'containers', 'sandbox');
      for (const f of readdirSync(files)) {
        const size = statSync(path.join(files, f)).size;
        assert.ok(size <= 1024, `termination log ${f} on the node holds ${size} bytes`);
      }
      assert.ok(
        (await diskBytes(path.join(kubeletRoot, 'pods', pod.metadata!.uid!))) < 4 * MiB,
        "the pod's directory on the node's disk stays small",
      );

      // The program's own lines come last (the status tail is read from the first MiB of a larger log).
      const tail = log.slice(-4096);
      // runc: the kernel refuses the open (/proc/1/fd is root's). gVisor opens them, but to nowhere.
      const [, said] = /channel (.*)\n/.exec(tail) ?? [];
      assert.equal(said, runtimeClassName ? '1:written 2:written' : '1:EACCES 2:EACCES', tail.slice(-600));
      const [, termBytes, termErr] = /termination-log (\d+) (\w+)/.exec(tail) ?? [];
      assert.equal(termErr, 'EFBIG', `${JSON.stringify(done.status)}\n${tail.slice(-600)}`);
      assert.ok(Number(termBytes) <= VOLUME_BYTES, `${termBytes} bytes reached the termination log`);
      if (sized) {
        // Full at the declared size: ENOSPC (or the file-size limit, as large), and the run ends normally.
        assert.equal(done.status?.phase, 'Succeeded', JSON.stringify(done.status));
        for (const v of ['workspace', 'tmp']) {
          const [, bytes, err] = new RegExp(`${v} (\\d+) (\\w+)`).exec(tail) ?? [];
          assert.ok(err === 'ENOSPC' || err === 'EFBIG', `${v}: ${tail}`);
          assert.ok(Number(bytes) <= VOLUME_BYTES, `${bytes} bytes in ${v}`);
        }
      } else {
        // A kubelet without SizeMemoryBackedVolumes mounts unsized tmpfs: the memory limit ends it.
        assert.equal(done.status?.reason, 'OOMKilled', JSON.stringify(done.status));
        assert.ok(report.stdoutBytes >= 1024 * MiB && MEMORY_BYTES > VOLUME_BYTES);
      }
    });
  }

  it('io_uring_setup is refused in a pod under runc (sandpit’s localhost seccomp profile)', async () => {
    const { cluster, ns } = ops.suite;
    const code = [
      'import ctypes, errno, os',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'params = ctypes.create_string_buffer(120)',
      'fd = libc.syscall(425, 8, params)',
      'print("io_uring_setup", fd, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))',
      'print("Seccomp", [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0])',
    ].join('\n');
    await createRun(cluster, ns, sandboxRun('uring', { template: 'python', code }));
    const done = await waitForFinished(cluster, ns, 'uring', 90_000);
    assert.equal(done.status?.phase, 'Succeeded', JSON.stringify(done.status));
    const out = done.status?.output?.tail ?? '';
    assert.match(out, /^io_uring_setup -1 (ENOSYS|EPERM)\nSeccomp 2\n$/);
    const [pod] = await podsOf(ops.suite, done);
    const profile = pod?.spec?.securityContext?.seccompProfile;
    assert.deepEqual([profile?.type, profile?.localhostProfile], ['Localhost', 'sandpit/runc.json']);
  });
});
