import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { buildContainerConfig } from '../../../../src/backends/docker/container-config.js';
import { RUNSC_HOST_PIDS, UNROUTABLE_NAMESERVER, resolvConf } from '../../../../src/backends/hardening.js';
import type { OciSpec } from '../../../../src/backends/oci/oci-spec.js';
import {
  buildRuntimeSpec,
  containerEnv,
  MASKED_PATHS,
  READONLY_PATHS,
  type RuntimeSpecOptions,
} from '../../../../src/backends/oci/runtime-spec.js';
import { IO_URING_SYSCALLS } from '../../../../src/policy/seccomp.js';
import type { SandboxShape } from '../../../../src/policy/shape.js';
import { EGRESS_SOCKET_DIR, RUNNER_PATH } from '../../../../src/runner/protocol.js';

const MiB = 1024 ** 2;
const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`../../../fixtures/oci/${name}`, import.meta.url), 'utf8'));

/** dockerd 20.10.24's own spec for a container of buildContainerConfig (python template, default limits). */
const dockerd = fixture('dockerd-20.10-python.json') as OciSpec & {
  linux: { resources: Record<string, unknown> };
};

const pythonDefaults: SandboxShape = {
  image: 'sandpit/python:3.11',
  runtime: undefined,
  template: 'python',
  workdir: '/workspace',
  network: { egress: 'none' },
  limits: {
    cpuMilli: 1000,
    memoryBytes: 512 * MiB,
    pids: 128,
    workspaceBytes: 64 * MiB,
    tmpBytes: 64 * MiB,
    fileSizeBytes: 64 * MiB,
    openFiles: 1024,
  },
};

const shape: SandboxShape = {
  ...pythonDefaults,
  limits: {
    cpuMilli: 1500,
    memoryBytes: 256 * MiB,
    pids: 100,
    workspaceBytes: 32 * MiB,
    tmpBytes: 16 * MiB,
    fileSizeBytes: 32 * MiB,
    openFiles: 2048,
  },
};

const options: RuntimeSpecOptions = {
  rootfs: 'ROOTFS',
  imageEnv: ['PATH=/usr/local/bin:/usr/bin:/bin', 'LANG=C.UTF-8', 'HOME=/home/sandbox'],
  etc: { resolvConf: 'ETC/resolv.conf', hosts: 'ETC/hosts', hostname: 'ETC/hostname' },
  cgroupsPath: 'CGROUP',
  annotations: { 'sandpit.dev/owner': 'host:1:2', 'sandpit.dev/run': 'r1' },
  host: { arch: 'amd64', kernel: '6.18.44-fc-v657' },
};

const build = (s: Partial<SandboxShape> = {}, o: Partial<RuntimeSpecOptions> = {}): OciSpec =>
  buildRuntimeSpec({ ...shape, ...s }, { ...options, ...o });

describe('the container dockerd makes of the same decision', () => {
  const ours = buildRuntimeSpec(pythonDefaults, options);

  test('the Docker rendering of this shape is what the fixture was made from', () => {
    const c = buildContainerConfig(pythonDefaults, { name: 'x', kind: 'run', owner: 'o' }).HostConfig!;
    assert.equal(c.Memory, dockerd.linux.resources.memory.limit);
    assert.equal(c.PidsLimit, dockerd.linux.resources.pids.limit);
    assert.equal(c.NanoCpus! / 10_000, dockerd.linux.resources.cpu.quota);
  });

  test('process: user, args, env, cwd, capabilities, rlimits, no new privileges, oomScoreAdj', () => {
    const { terminal, ...rest } = ours.process;
    assert.equal(terminal, false);
    assert.deepEqual(rest, dockerd.process);
  });

  test('mounts: the same kernel file systems, tmpfs and read-only /etc files, in the same order', () => {
    assert.deepEqual(ours.mounts, dockerd.mounts);
  });

  test('root read-only, hostname', () => {
    assert.deepEqual(ours.root, dockerd.root);
    assert.equal(ours.hostname, dockerd.hostname);
  });

  test('resources: devices, memory with swap equal, CPU quota, pids', () => {
    const r = dockerd.linux.resources as unknown as OciSpec['linux']['resources'] & {
      cpu: { shares: number };
    };
    assert.deepEqual(ours.linux.resources.devices, r.devices);
    assert.deepEqual(ours.linux.resources.memory, r.memory);
    assert.deepEqual(ours.linux.resources.cpu, { quota: r.cpu.quota, period: r.cpu.period });
    assert.deepEqual(ours.linux.resources.pids, r.pids);
  });

  test('masked and read-only paths, sysctls', () => {
    assert.deepEqual(ours.linux.maskedPaths, dockerd.linux.maskedPaths);
    assert.deepEqual(ours.linux.readonlyPaths, dockerd.linux.readonlyPaths);
    assert.deepEqual(ours.linux.sysctl, dockerd.linux.sysctl);
  });

  test('namespaces: Docker’s, and a cgroup namespace too', () => {
    assert.deepEqual(ours.linux.namespaces, [...dockerd.linux.namespaces, { type: 'cgroup' }]);
  });

  test('seccomp: sandpit’s profile, filtered for this host exactly as dockerd filters it', () => {
    assert.deepEqual(ours.linux.seccomp, dockerd.linux.seccomp);
  });

  test('seccomp under gVisor: sandpit’s gVisor profile, as dockerd renders it for runsc', () => {
    const runsc = buildRuntimeSpec({ ...pythonDefaults, runtime: 'runsc' }, options);
    assert.deepEqual(runsc.linux.seccomp, fixture('dockerd-20.10-runsc-seccomp.json'));
    assert.notDeepEqual(runsc.linux.seccomp, ours.linux.seccomp);
  });
});

describe('field by field', () => {
  test('memory limit and memory+swap are equal: no swap', () => {
    assert.deepEqual(build().linux.resources.memory, {
      limit: 256 * MiB,
      swap: 256 * MiB,
      disableOOMKiller: false,
    });
  });

  for (const [milli, quota] of [
    [1000, 100_000],
    [1500, 150_000],
    [250, 25_000],
    [1, 100],
  ] as const) {
    test(`CPU ${milli}m is a quota of ${quota} µs per 100 ms`, () => {
      assert.deepEqual(build({ limits: { ...shape.limits, cpuMilli: milli } }).linux.resources.cpu, {
        quota,
        period: 100_000,
      });
    });
  }

  test('pids: the limit under runc; under runsc RLIMIT_NPROC, and room for gVisor’s own threads', () => {
    assert.equal(build().linux.resources.pids.limit, 100);
    assert.equal(build({ runtime: 'runc' }).linux.resources.pids.limit, 100);
    assert.equal(build({ runtime: 'runsc' }).linux.resources.pids.limit, RUNSC_HOST_PIDS);
    assert.deepEqual(
      build({ runtime: 'runsc' }).process.rlimits.find((r) => r.type === 'RLIMIT_NPROC'),
      { type: 'RLIMIT_NPROC', hard: 100, soft: 100 },
    );
  });

  test('rlimits: nofile, fsize, and no core dumps', () => {
    assert.deepEqual(build().process.rlimits, [
      { type: 'RLIMIT_NOFILE', hard: 2048, soft: 2048 },
      { type: 'RLIMIT_FSIZE', hard: 32 * MiB, soft: 32 * MiB },
      { type: 'RLIMIT_CORE', hard: 0, soft: 0 },
    ]);
  });

  test('size-limited tmpfs for /tmp, the workspace and /dev/shm (the first two inode-limited too); the workspace is 1000’s', () => {
    const tmpfs = Object.fromEntries(
      build()
        .mounts.filter((m) => m.type === 'tmpfs')
        .map((m) => [m.destination, m.options]),
    );
    assert.deepEqual(tmpfs['/tmp'], [
      'rprivate',
      'rw',
      'exec',
      'nosuid',
      'nodev',
      `size=${16 * MiB}`,
      'nr_inodes=4096',
      'mode=1777',
    ]);
    assert.deepEqual(tmpfs['/workspace'], [
      'rprivate',
      'rw',
      'exec',
      'nosuid',
      'nodev',
      `size=${32 * MiB}`,
      'nr_inodes=8192',
      'uid=1000',
      'gid=1000',
      'mode=0755',
    ]);
    assert.deepEqual(tmpfs['/dev/shm'], ['nosuid', 'noexec', 'nodev', 'mode=1777', `size=${64 * MiB}`]);
  });

  test('the workspace follows the workdir', () => {
    const s = build({ workdir: '/home/sandbox' });
    assert.equal(s.process.cwd, '/home/sandbox');
    assert.ok(s.mounts.some((m) => m.destination === '/home/sandbox' && m.type === 'tmpfs'));
    assert.ok(!s.mounts.some((m) => m.destination === '/workspace'));
  });

  test('a read-only root; the only host paths are the rootfs and the read-only /etc files', () => {
    const s = build();
    assert.deepEqual(s.root, { path: 'ROOTFS', readonly: true });
    const binds = s.mounts.filter((m) => m.type === 'bind');
    assert.deepEqual(
      binds.map((m) => [m.destination, m.source]),
      [
        ['/etc/resolv.conf', 'ETC/resolv.conf'],
        ['/etc/hostname', 'ETC/hostname'],
        ['/etc/hosts', 'ETC/hosts'],
      ],
    );
    for (const m of binds) assert.ok(m.options.includes('ro'), m.destination);
  });

  test('egress none: nothing more is mounted or annotated, whatever directory is offered', () => {
    const s = build({}, { egressDir: '/run/sandpit/egress/0123456789abcdef' });
    assert.deepEqual(s, build());
  });

  test("an egress sandbox: still only lo and no resolver; the proxy's socket directory mounted read-only, and named for the reaper", () => {
    const dir = '/run/sandpit/egress/0123456789abcdef';
    const s = build({ network: { egress: 'allowlist' } }, { egressDir: dir });
    const plain = build();
    assert.deepEqual(s.mounts.slice(0, -1), plain.mounts, 'the same mounts, one more at the end');
    assert.deepEqual(s.mounts.at(-1), {
      destination: '/run/sandpit-egress',
      type: 'bind',
      source: dir,
      options: ['rbind', 'ro', 'rprivate'],
    });
    assert.equal(EGRESS_SOCKET_DIR, '/run/sandpit-egress');
    assert.deepEqual(s.annotations, { ...plain.annotations, 'sandpit.dev/egress-dir': dir });
    assert.deepEqual(s.linux.namespaces, plain.linux.namespaces, 'a network namespace of its own');
    assert.deepEqual(s.linux.seccomp, plain.linux.seccomp);
    assert.deepEqual(
      s.mounts.find((m) => m.destination === '/etc/resolv.conf'),
      plain.mounts.find((m) => m.destination === '/etc/resolv.conf'),
    );
    assert.throws(
      () => build({ network: { egress: 'allowlist' } }),
      /needs the directory of its proxy socket/,
    );
  });

  test('the Docker rendering of an egress sandbox mounts the same directory at the same place, read-only', () => {
    const dir = '/run/sandpit/egress/0123456789abcdef';
    const egress: SandboxShape = { ...pythonDefaults, network: { egress: 'allowlist' } };
    const docker = buildContainerConfig(egress, { name: 'x', kind: 'run', owner: 'o', egressDir: dir });
    const [mount] = docker.HostConfig!.Mounts!;
    const ours = buildRuntimeSpec(egress, { ...options, egressDir: dir }).mounts.at(-1)!;
    assert.deepEqual([mount!.Source, mount!.Target, mount!.ReadOnly], [ours.source, ours.destination, true]);
    assert.ok(ours.options.includes('ro'));
  });

  test('/proc and /sys: Docker’s masked and read-only paths; sysfs and cgroupfs read-only', () => {
    const s = build();
    assert.deepEqual(s.linux.maskedPaths, MASKED_PATHS);
    assert.deepEqual(s.linux.readonlyPaths, READONLY_PATHS);
    assert.ok(MASKED_PATHS.includes('/proc/kcore') && READONLY_PATHS.includes('/proc/sys'));
    for (const dest of ['/sys', '/sys/fs/cgroup'])
      assert.ok(s.mounts.find((m) => m.destination === dest)?.options.includes('ro'), dest);
  });

  test('uid/gid 1000, no capabilities in any set, no new privileges', () => {
    const p = build().process;
    assert.deepEqual(p.user, { uid: 1000, gid: 1000, additionalGids: [1000] });
    assert.deepEqual(p.capabilities, {});
    assert.equal(p.noNewPrivileges, true);
  });

  test('fresh pid, network, ipc, uts, mount and cgroup namespaces, none joined from the host', () => {
    const ns = build().linux.namespaces;
    assert.deepEqual(ns.map((n) => n.type).sort(), ['cgroup', 'ipc', 'mount', 'network', 'pid', 'uts']);
    for (const n of ns) assert.deepEqual(Object.keys(n), ['type'], 'no path: a new namespace');
  });

  test('seccomp: the default action refuses, io_uring is not allowed, the host’s architectures', () => {
    const sc = build().linux.seccomp;
    assert.equal(sc.defaultAction, 'SCMP_ACT_ERRNO');
    assert.deepEqual(sc.architectures, ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32']);
    const allowed = sc.syscalls.filter((r) => r.action === 'SCMP_ACT_ALLOW').flatMap((r) => r.names);
    for (const name of IO_URING_SYSCALLS) assert.ok(!allowed.includes(name), name);
    assert.ok(allowed.includes('read'));
  });

  test('the runner is the process, with no terminal; the session mode and its wait for the open', () => {
    assert.deepEqual(build().process.args, [RUNNER_PATH]);
    assert.equal(build().process.terminal, false);
    assert.deepEqual(build({}, { mode: 'session', openWithinSeconds: 30 }).process.args, [
      RUNNER_PATH,
      '--session',
      '--open-within',
      '30',
    ]);
  });

  test('the cgroup and the ownership annotations are the caller’s', () => {
    const s = build();
    assert.equal(s.linux.cgroupsPath, 'CGROUP');
    assert.deepEqual(s.annotations, { 'sandpit.dev/owner': 'host:1:2', 'sandpit.dev/run': 'r1' });
  });

  test('AppArmor only where the host has a profile for it', () => {
    assert.equal(build().process.apparmorProfile, undefined);
    assert.equal(build({}, { apparmorProfile: 'docker-default' }).process.apparmorProfile, 'docker-default');
  });

  test('the builder is pure: the same input, the same spec; outputs share nothing', () => {
    const a = build();
    const b = build();
    assert.deepEqual(a, b);
    a.linux.seccomp.syscalls.length = 0;
    a.linux.resources.devices.length = 0;
    assert.deepEqual(build(), b);
  });
});

describe('the resolver and the environment', () => {
  test('resolv.conf names only the unroutable nameserver, one quick attempt', () => {
    assert.equal(resolvConf(), `nameserver ${UNROUTABLE_NAMESERVER}\noptions attempts:1 timeout:1\n`);
  });

  test('Docker’s PATH and HOSTNAME, replaced in place by the image’s own', () => {
    assert.deepEqual(containerEnv([]), [
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      'HOSTNAME=sandbox',
    ]);
    assert.deepEqual(containerEnv(['LANG=C', 'PATH=/bin', 'PATHX=1']), [
      'PATH=/bin',
      'HOSTNAME=sandbox',
      'LANG=C',
      'PATHX=1',
    ]);
  });
});
