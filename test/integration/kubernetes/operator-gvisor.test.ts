// SandboxRuns under the `gvisor` RuntimeClass (handler runsc on the node's containerd), reconciled
// by the real operator: the program sees gVisor's kernel, and the hostile cases the Docker tier
// runs (deadline, memory hog, fork bomb, read-only rootfs, capabilities, no network) end as they
// do under runc. A run in no RuntimeClass sees the host's kernel.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { release } from 'node:os';
import { describe } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import {
  createRun,
  sandboxRun,
  operatorSuite,
  podsOf,
  waitForFinished,
  waitForPhase,
} from './operator-harness.js';
import type { SandboxRun } from '../../../src/api/v1alpha1/sandboxrun.js';

const GVISOR = 'gvisor';

/** Wall time of a trivial host command. */
function hostCommandMs(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('/bin/sh', ['-c', 'ls / > /dev/null'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => resolve(performance.now() - t0));
  });
}

// One at a time: the fork bomb measures the host's responsiveness.
describe('SandboxRuns under the gvisor RuntimeClass', { timeout: 300_000 }, () => {
  const ops = operatorSuite('operator-gvisor', {
    // 1Gi and 60 s for the fork bomb: under gVisor every guest process costs sentry and stub
    // memory, and ptrace forks slowly
    sandbox: { maxMemory: '1Gi', timeoutSeconds: 60 },
    kubernetes: { allowedRuntimeClasses: [GVISOR, 'runc'] },
  });
  const { it } = ops;

  /** Creates the run (under gvisor unless the spec says otherwise), waits for it to finish, checks its pod's class. */
  async function run(name: string, spec: Parameters<typeof sandboxRun>[1]): Promise<SandboxRun> {
    const { cluster, ns } = ops.suite;
    const inClass = 'runtimeClassName' in spec ? spec : { ...spec, runtimeClassName: GVISOR };
    await createRun(cluster, ns, sandboxRun(name, inClass));
    const done = await waitForFinished(cluster, ns, name, 90_000);
    const pods: V1Pod[] = await podsOf(ops.suite, done);
    assert.deepEqual(
      pods.map((p) => p.spec?.runtimeClassName),
      [inClass.runtimeClassName],
    );
    return done;
  }

  it('the program sees gVisor (its kernel release) under the pod’s seccomp profile (syslog refused: runsc --oci-seccomp); a run in no class sees the host', async () => {
    const code = [
      'import platform, subprocess',
      'print(platform.release())',
      'print(open("/proc/version").read().split("#")[0].strip())',
      'dmesg = subprocess.run(["dmesg"], capture_output=True, text=True)',
      'print("dmesg", "refused" if dmesg.returncode != 0 else "allowed")',
    ].join('\n');
    const gvisor = await run('kernel-gvisor', { template: 'python', code });
    assert.equal(gvisor.status?.phase, 'Succeeded', JSON.stringify(gvisor.status));
    assert.equal(gvisor.status?.output?.tail, '4.4.0\nLinux version 4.4.0\ndmesg refused\n');

    const host = await run('kernel-host', {
      template: 'python',
      code: 'import platform; print(platform.release())',
      runtimeClassName: undefined,
    });
    assert.equal(host.status?.phase, 'Succeeded', JSON.stringify(host.status));
    assert.equal(host.status?.output?.tail, `${release()}\n`);
  });

  it('the pod log comes whole once the program has ended: while it runs, the runner holds no descriptor of it', async () => {
    const { cluster, ns } = ops.suite;
    const code = [
      'import time',
      'print("first", time.time(), flush=True)',
      'time.sleep(6)',
      'print("second", flush=True)',
    ].join('\n');
    await createRun(cluster, ns, sandboxRun('later', { template: 'python', code, runtimeClassName: GVISOR }));
    const running = await waitForPhase(cluster, ns, 'later', 'Running', 60_000);
    const [pod] = await podsOf(ops.suite, running);
    assert.ok(pod?.metadata?.name);
    let finished = false;
    const done = waitForFinished(cluster, ns, 'later', 90_000).finally(() => (finished = true));
    const seen: { at: number; log: string }[] = [];
    while (!finished) {
      seen.push({ at: Date.now() / 1000, log: await cluster.podLog(ns, pod.metadata.name) });
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.equal((await done).status?.phase, 'Succeeded');
    const log = await cluster.podLog(ns, pod.metadata.name);
    const printedAt = Number(/^first (\d+\.\d+)\nsecond\n$/.exec(log)?.[1]);
    assert.ok(printedAt > 0, log);
    // Read empty well after the program had printed its first line (1 s for the clocks), and never in part.
    assert.ok(
      seen.some((s) => s.log === '' && s.at > printedAt + 1),
      JSON.stringify({ printedAt, seen: seen.map((s) => [s.at, s.log.length]) }),
    );
    for (const s of seen) assert.ok(s.log === '' || s.log === log, JSON.stringify(s));
  });

  it('an endless loop: TimedOut/DeadlineExceeded within the deadline + 5 s', async () => {
    const { cluster, ns } = ops.suite;
    const timeoutSeconds = 4;
    await createRun(
      cluster,
      ns,
      sandboxRun('loops', {
        template: 'python',
        code: 'while True:\n    pass',
        timeoutSeconds,
        runtimeClassName: GVISOR,
      }),
    );
    await waitForPhase(cluster, ns, 'loops', 'Running', 60_000);
    const runningSeen = Date.now();
    const done = await waitForFinished(cluster, ns, 'loops', 60_000);
    const elapsed = (Date.now() - runningSeen) / 1000;
    assert.equal(done.status?.phase, 'TimedOut', JSON.stringify(done.status));
    assert.equal(done.status?.reason, 'DeadlineExceeded');
    assert.ok(elapsed <= timeoutSeconds + 5, `TimedOut seen ${elapsed.toFixed(1)} s after Running`);
  });

  it('a memory hog: Failed/OOMKilled, exit code 137', async () => {
    const done = await run('hog', {
      template: 'python',
      code: 'blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))',
      resources: { memory: '128Mi' },
    });
    assert.equal(done.status?.phase, 'Failed', JSON.stringify(done.status));
    assert.equal(done.status?.reason, 'OOMKilled');
    assert.equal(done.status?.exitCode, 137);
  });

  it('a fork bomb is contained: at most the node’s pod pids limit (128) of processes, and the host stays responsive', async () => {
    const { cluster, ns } = ops.suite;
    const code = [
      'import os, subprocess, time',
      'children = []',
      'while len(children) < 1000:',
      '    try: pid = os.fork()',
      '    except OSError: break',
      '    if pid == 0:',
      '        time.sleep(30); os._exit(0)',
      '    children.append(pid)',
      'print("spawned", len(children))',
      'print("visible", len([p for p in os.listdir("/proc") if p.isdigit()]))',
      'for pid in children: os.kill(pid, 9); os.waitpid(pid, 0)',
      'subprocess.Popen(["bash", "-c", "bomb() { bomb | bomb & }; bomb"], stderr=subprocess.DEVNULL)',
      'time.sleep(3)',
      'print("survived")',
    ].join('\n');
    await createRun(
      cluster,
      ns,
      sandboxRun('bomb', {
        template: 'python',
        code,
        // gVisor's ptrace platform forks slowly: on 2 busy cores the program alone can take 20 s.
        timeoutSeconds: 60,
        resources: { memory: '1Gi' },
        runtimeClassName: GVISOR,
      }),
    );
    await waitForPhase(cluster, ns, 'bomb', 'Running', 60_000);
    await new Promise((r) => setTimeout(r, 2500));
    const hostMs = await hostCommandMs();
    const done = await waitForFinished(cluster, ns, 'bomb', 120_000);
    const out = done.status?.output?.tail ?? '';
    const spawned = Number(/spawned (\d+)/.exec(out)?.[1]);
    const visible = Number(/visible (\d+)/.exec(out)?.[1]);
    assert.equal(done.status?.phase, 'Succeeded', JSON.stringify(done.status));
    assert.ok(spawned > 10 && spawned < 128, `spawned ${spawned} processes under a limit of 128`);
    assert.ok(visible <= 128, `${visible} processes visible at once`);
    assert.ok(hostMs < 1000, `a host command took ${hostMs.toFixed(0)} ms during the bomb`);
    assert.match(out, /survived/);
  });

  it('the rootfs is read-only, the uid is 1000, no capabilities, no new privileges, only lo and no route out', async () => {
    const code = [
      'import ctypes, os, socket',
      'try:',
      // /home/sandbox belongs to uid 1000, so only a read-only rootfs can refuse this write.
      '    open("/home/sandbox/probe", "w")',
      '    print("rootfs writable")',
      'except OSError as e:',
      '    print("rootfs", e.strerror)',
      'print("uid", os.getuid(), os.getgid())',
      'status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)',
      // prctl(PR_GET_NO_NEW_PRIVS): gVisor does not print NoNewPrivs in /proc/self/status.
      'nnp = ctypes.CDLL(None, use_errno=True).prctl(39, 0, 0, 0, 0)',
      'print("CapEff", status["CapEff"].strip(), "CapPrm", status["CapPrm"].strip(), "NoNewPrivs", nnp)',
      // gVisor has no /sys/class/net: the kernel's own interface list.
      'print("interfaces", sorted(n for _, n in socket.if_nameindex()))',
      'routes = [l.split() for l in open("/proc/net/route").read().splitlines()[1:]]',
      'print("default route", any(r[1] == "00000000" for r in routes))',
    ].join('\n');
    const done = await run('hardened', { template: 'python', code });
    assert.equal(done.status?.phase, 'Succeeded', JSON.stringify(done.status));
    assert.equal(
      done.status?.output?.tail,
      'rootfs Read-only file system\nuid 1000 1000\n' +
        'CapEff 0000000000000000 CapPrm 0000000000000000 NoNewPrivs 1\n' +
        "interfaces ['lo']\ndefault route False\n",
    );
  });
});
