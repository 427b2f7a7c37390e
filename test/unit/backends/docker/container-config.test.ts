import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  buildContainerConfig,
  RUNSC_HOST_PIDS,
  SANDBOX_USER,
  UNROUTABLE_NAMESERVER,
  type ContainerOptions,
} from '../../../../src/backends/docker/container-config.js';
import { LABELS, MANAGED_BY, MANAGED_FILTER } from '../../../../src/backends/docker/labels.js';
import { buildSeccompProfile } from '../../../../src/policy/seccomp.js';
import { RUNNER_PATH } from '../../../../src/runner/protocol.js';
import { poolKey, type SandboxShape } from '../../../../src/policy/shape.js';

const MiB = 1024 ** 2;
const KEY = Buffer.alloc(16, 0xab);

const shape: SandboxShape = {
  image: 'sandpit/python:3.11',
  runtime: undefined,
  template: 'python',
  workdir: '/workspace',
  limits: {
    cpuMilli: 1500,
    memoryBytes: 256 * MiB,
    pids: 100,
    workspaceBytes: 32 * MiB,
    tmpBytes: 16 * MiB,
    fileSizeBytes: 32 * MiB,
    openFiles: 1024,
  },
  network: { egress: 'none' },
};
const options: ContainerOptions = {
  name: 'sandpit-run-abc',
  runId: 'abc',
  kind: 'run',
  owner: 'host:123:456',
  expiresAt: 1_800_000_000_000,
};

const build = (s: Partial<SandboxShape> = {}, o: Partial<ContainerOptions> = {}) =>
  buildContainerConfig({ ...shape, ...s }, { ...options, ...o });
const host = (s: Partial<SandboxShape> = {}) => build(s).HostConfig!;

describe('network', () => {
  test('NetworkMode none, never re-enabled', () => {
    const c = build();
    assert.equal(c.HostConfig!.NetworkMode, 'none');
    assert.notEqual(c.NetworkDisabled, false);
    assert.equal(c.HostConfig!.PortBindings, undefined);
    assert.equal(c.ExposedPorts, undefined);
    assert.equal(c.HostConfig!.ExtraHosts, undefined);
  });

  test('the only nameserver is unroutable (TEST-NET-1), one quick attempt, no search domains', () => {
    assert.equal(UNROUTABLE_NAMESERVER, '192.0.2.1');
    assert.deepEqual(host().Dns, ['192.0.2.1']);
    assert.deepEqual(host().DnsOptions, ['attempts:1', 'timeout:1']);
    assert.deepEqual(host().DnsSearch, []);
  });

  test('a neutral hostname', () => {
    assert.equal(build().Hostname, 'sandbox');
  });

  test('egress none: nothing is mounted, whatever directory is offered', () => {
    const c = build({}, { egressDir: '/run/user/0/sandpit/egress/0123456789abcdef' });
    assert.equal(c.HostConfig!.Mounts, undefined);
    assert.equal(c.Labels![LABELS.egressDir], undefined);
  });

  test("an egress sandbox: still NetworkMode none and no resolver; the proxy's socket directory mounted read-only", () => {
    const dir = '/run/user/0/sandpit/egress/0123456789abcdef';
    const c = build({ network: { egress: 'allowlist' } }, { egressDir: dir });
    assert.equal(c.HostConfig!.NetworkMode, 'none');
    assert.deepEqual(c.HostConfig!.Dns, ['192.0.2.1']);
    assert.deepEqual(c.HostConfig!.Mounts, [
      { Type: 'bind', Source: dir, Target: '/run/sandpit-egress', ReadOnly: true },
    ]);
    assert.equal(c.Labels![LABELS.egressDir], dir);
    assert.equal(c.HostConfig!.Runtime, undefined);
    assert.throws(
      () => build({ network: { egress: 'allowlist' } }),
      /needs the directory of its proxy socket/,
    );
  });

  test('an egress sandbox under runsc runs in runsc-egress (--host-uds=open); others keep runsc', () => {
    const dir = '/tmp/sandpit/egress/0123456789abcdef';
    assert.equal(host({ runtime: 'runsc' }).Runtime, 'runsc');
    assert.equal(
      build({ runtime: 'runsc', network: { egress: 'allowlist' } }, { egressDir: dir }).HostConfig!.Runtime,
      'runsc-egress',
    );
    assert.equal(
      build({ runtime: 'runc', network: { egress: 'allowlist' } }, { egressDir: dir }).HostConfig!.Runtime,
      'runc',
    );
  });
});

describe('resources', () => {
  test('Memory and MemorySwap are equal: no swap', () => {
    assert.equal(host().Memory, 256 * MiB);
    assert.equal(host().MemorySwap, 256 * MiB);
  });

  const cpus: [number, number][] = [
    [1000, 1_000_000_000],
    [1500, 1_500_000_000],
    [250, 250_000_000],
    [1, 1_000_000],
  ];
  for (const [milli, nano] of cpus) {
    test(`NanoCpus for ${milli}m is ${nano}`, () => {
      assert.equal(host({ limits: { ...shape.limits, cpuMilli: milli } }).NanoCpus, nano);
    });
  }

  test('PidsLimit is the pids limit under runc or the default runtime', () => {
    assert.equal(host().PidsLimit, 100);
    assert.equal(host({ runtime: 'runc' }).PidsLimit, 100);
  });

  test('under runsc the pids limit is the nproc ulimit, and PidsLimit leaves room for gVisor’s own threads', () => {
    assert.equal(RUNSC_HOST_PIDS, 4096);
    assert.equal(host({ runtime: 'runsc' }).PidsLimit, 4096);
    assert.equal(host({ runtime: 'runsc', limits: { ...shape.limits, pids: 1000 } }).PidsLimit, 32_000);
    assert.deepEqual(
      host({ runtime: 'runsc' }).Ulimits?.find((u) => u.Name === 'nproc'),
      { Name: 'nproc', Soft: 100, Hard: 100 },
    );
  });

  test('ulimits: nofile, fsize and no core dumps; no nproc under runc (the host counts it per uid)', () => {
    for (const runtime of [undefined, 'runc'])
      assert.deepEqual(host({ runtime }).Ulimits, [
        { Name: 'nofile', Soft: 1024, Hard: 1024 },
        { Name: 'fsize', Soft: 32 * MiB, Hard: 32 * MiB },
        { Name: 'core', Soft: 0, Hard: 0 },
      ]);
  });
});

describe('filesystem', () => {
  test('read-only root filesystem', () => {
    assert.equal(host().ReadonlyRootfs, true);
  });

  test('size- and inode-limited tmpfs for /tmp and the workspace (an inode a page), no suid or devices, workspace owned by 1000', () => {
    assert.deepEqual(host().Tmpfs, {
      '/tmp': `rw,exec,nosuid,nodev,size=${16 * MiB},nr_inodes=4096,mode=1777`,
      '/workspace': `rw,exec,nosuid,nodev,size=${32 * MiB},nr_inodes=8192,uid=1000,gid=1000,mode=0755`,
    });
  });

  test('/dev/shm is size-limited, stated rather than left to the daemon default', () => {
    assert.equal(host().ShmSize, 64 * MiB);
  });

  test('the workspace tmpfs follows the workdir', () => {
    const c = build({ workdir: '/home/sandbox' });
    assert.equal(c.WorkingDir, '/home/sandbox');
    assert.deepEqual(Object.keys(c.HostConfig!.Tmpfs!).sort(), ['/home/sandbox', '/tmp']);
  });

  test('no host mounts, volumes or devices', () => {
    const h = host();
    assert.equal(h.Binds, undefined);
    assert.equal(h.Mounts, undefined);
    assert.equal(h.VolumesFrom, undefined);
    assert.equal(h.Devices, undefined);
    assert.equal(build().Volumes, undefined);
  });
});

describe('privileges', () => {
  test('every capability dropped, none added', () => {
    assert.deepEqual(host().CapDrop, ['ALL']);
    assert.equal(host().CapAdd, undefined);
  });

  test('no-new-privileges, sandpit’s seccomp profile, and not privileged', () => {
    const opts: string[] = host().SecurityOpt ?? [];
    assert.equal(opts.length, 2);
    assert.equal(opts[0], 'no-new-privileges');
    assert.equal(host().Privileged, false);
    const profile = (o: string | undefined): unknown => {
      const prefix = 'seccomp=';
      if (!o?.startsWith(prefix)) assert.fail(`not a seccomp option: ${o}`);
      return JSON.parse(o.slice(prefix.length));
    };
    assert.deepEqual(profile(opts[1]), buildSeccompProfile({ gvisor: false }));
    const runsc: string[] = host({ runtime: 'runsc' }).SecurityOpt ?? [];
    assert.deepEqual(profile(runsc[1]), buildSeccompProfile({ gvisor: true }));
  });

  test('runs as 1000:1000', () => {
    assert.equal(SANDBOX_USER, '1000:1000');
    assert.equal(build().User, '1000:1000');
  });

  test('private IPC, no host PID/UTS/user namespaces', () => {
    const h = host();
    assert.equal(h.IpcMode, 'private');
    assert.equal(h.PidMode, undefined);
    assert.equal(h.UTSMode, undefined);
    assert.equal(h.UsernsMode, undefined);
  });
});

describe('process and I/O', () => {
  test('the runner is the entrypoint, with no command and no environment of its own', () => {
    const c = build();
    assert.equal(RUNNER_PATH, '/usr/local/bin/sandpit-runner');
    assert.deepEqual(c.Entrypoint, [RUNNER_PATH]);
    assert.deepEqual(c.Cmd, []);
    assert.deepEqual(c.Env, []);
    assert.equal(c.Image, 'sandpit/python:3.11');
    assert.equal(c.name, 'sandpit-run-abc');
  });

  test("a pre-warmed pool's container starts the job's interpreter ahead, with its variables; a cold one does not", () => {
    const env = [{ name: 'PYTHONUNBUFFERED', value: '1' }];
    assert.deepEqual(build({}, { kind: 'pool', runId: undefined, preloadEnv: env }).Cmd, [
      '--preload',
      '--env',
      'PYTHONUNBUFFERED=1',
    ]);
    assert.deepEqual(build().Cmd, []);
  });

  test('attached stdin (once) and stdout/stderr, no TTY', () => {
    const c = build();
    assert.equal(c.AttachStdin, true);
    assert.equal(c.OpenStdin, true);
    assert.equal(c.StdinOnce, true);
    assert.equal(c.AttachStdout, true);
    assert.equal(c.AttachStderr, true);
    assert.equal(c.Tty, false);
  });

  test('logging driver none: output never reaches host disk', () => {
    assert.deepEqual(host().LogConfig, { Type: 'none', Config: {} });
  });

  test("a run's container is stopped with SIGKILL (its runner, PID 1, ignores SIGTERM); a session's with SIGTERM", () => {
    assert.equal(build().StopSignal, 'SIGKILL');
    assert.equal(build({}, { kind: 'pool', runId: undefined }).StopSignal, 'SIGKILL');
    const session = build(
      {},
      { kind: 'session', mode: 'session', session: { openWithinSeconds: 60, key: KEY } },
    );
    assert.equal(
      session.StopSignal,
      undefined,
      "the engine's default, SIGTERM: the runner ends the session on it",
    );
  });

  test('no init, no auto-remove (the backend removes after reading the result)', () => {
    assert.equal(host().Init, false);
    assert.equal(host().AutoRemove, false);
  });
});

describe('session mode', () => {
  const session = (o: Partial<ContainerOptions> = {}) =>
    build(
      {},
      {
        name: 'sandpit-session-s1',
        kind: 'session',
        runId: undefined,
        expiresAt: undefined,
        mode: 'session',
        session: {
          sessionId: 's1',
          principal: 'ci',
          instance: '/srv/sandpit',
          openWithinSeconds: 60,
          key: KEY,
        },
        ...o,
      },
    );

  test('the runner serves a session, and exits unless one is opened within the given time', () => {
    assert.deepEqual(session().Entrypoint, [RUNNER_PATH]);
    assert.deepEqual(session().Cmd, ['--session', '--open-within', '60']);
  });

  test("stdin outlives the gateway's attach (StdinOnce false), so a restarted gateway can re-attach", () => {
    const c = session();
    assert.equal(c.OpenStdin, true);
    assert.equal(c.AttachStdin, true);
    assert.equal(c.StdinOnce, false);
    assert.equal(build().StdinOnce, true, 'runs keep StdinOnce');
  });

  test('labels: mode, session, principal, instance and the channel key (kind session), no expiry', () => {
    assert.deepEqual(session().Labels, {
      'sandpit.dev/managed-by': 'sandpit',
      'sandpit.dev/kind': 'session',
      'sandpit.dev/owner': 'host:123:456',
      'sandpit.dev/template': 'python',
      'sandpit.dev/mode': 'session',
      'sandpit.dev/session': 's1',
      'sandpit.dev/principal': 'ci',
      'sandpit.dev/instance': '/srv/sandpit',
      'sandpit.dev/channel-key': KEY.toString('hex'),
    });
    const ephemeral = session({ session: { openWithinSeconds: 60, key: KEY } }).Labels!;
    assert.equal(ephemeral['sandpit.dev/instance'], undefined, 'no instance: nobody adopts it');
  });

  test('the same hardening as a run', () => {
    const { Labels: _a, Cmd: _b, StdinOnce: _c, name: _d, ...sessionRest } = session();
    const { Labels: _e, Cmd: _f, StdinOnce: _g, name: _h, StopSignal: _i, ...runRest } = build();
    assert.deepEqual(sessionRest, runRest);
  });

  test('the pool key tells a session pool from a run pool of the same shape', () => {
    assert.notEqual(poolKey(shape, 'session'), poolKey(shape, 'run'));
    assert.equal(poolKey(shape), poolKey(shape, 'run'));
    assert.equal(poolKey(shape, 'session'), poolKey({ ...shape }, 'session'));
  });

  test('the pool key tells an egress pool from one without; the key of one without egress is as it was', () => {
    const egress: SandboxShape = { ...shape, network: { egress: 'allowlist' } };
    assert.notEqual(poolKey(egress), poolKey(shape));
    assert.equal(
      poolKey(shape),
      JSON.stringify([
        'run',
        'python',
        'sandpit/python:3.11',
        '',
        '/workspace',
        1500,
        256 * MiB,
        100,
        32 * MiB,
        16 * MiB,
        32 * MiB,
        1024,
      ]),
    );
  });
});

describe('runtime', () => {
  test('set only when given', () => {
    assert.equal('Runtime' in host(), false);
    assert.equal(host({ runtime: 'runsc' }).Runtime, 'runsc');
    assert.equal(host({ runtime: 'runc' }).Runtime, 'runc');
  });
});

describe('labels', () => {
  test('a run container: managed-by, kind, owner, run, template, expires-at', () => {
    assert.deepEqual(build().Labels, {
      'sandpit.dev/managed-by': 'sandpit',
      'sandpit.dev/kind': 'run',
      'sandpit.dev/owner': 'host:123:456',
      'sandpit.dev/run': 'abc',
      'sandpit.dev/template': 'python',
      'sandpit.dev/expires-at': '1800000000000',
    });
  });

  test('a pool container without run, template or expiry leaves those labels out', () => {
    const { runId: _r, expiresAt: _e, ...rest } = options;
    const c = buildContainerConfig({ ...shape, template: undefined }, { ...rest, kind: 'pool' });
    assert.deepEqual(c.Labels, {
      'sandpit.dev/managed-by': 'sandpit',
      'sandpit.dev/kind': 'pool',
      'sandpit.dev/owner': 'host:123:456',
    });
  });

  test('the label names and the reaper filter', () => {
    assert.deepEqual(LABELS, {
      managedBy: 'sandpit.dev/managed-by',
      run: 'sandpit.dev/run',
      template: 'sandpit.dev/template',
      kind: 'sandpit.dev/kind',
      owner: 'sandpit.dev/owner',
      expires: 'sandpit.dev/expires-at',
      mode: 'sandpit.dev/mode',
      session: 'sandpit.dev/session',
      channelKey: 'sandpit.dev/channel-key',
      principal: 'sandpit.dev/principal',
      instance: 'sandpit.dev/instance',
      egressDir: 'sandpit.dev/egress-dir',
    });
    assert.equal(MANAGED_BY, 'sandpit');
    assert.equal(MANAGED_FILTER, 'sandpit.dev/managed-by=sandpit');
  });
});

test('the config depends only on the shape: two builds are equal and independent', () => {
  const a = build();
  const b = build();
  assert.deepEqual(a, b);
  (a.HostConfig!.CapDrop as string[]).push('x');
  assert.deepEqual(b.HostConfig!.CapDrop, ['ALL']);
});
