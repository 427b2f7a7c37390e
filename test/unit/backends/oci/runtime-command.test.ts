import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { OciLayout } from '../../../../src/backends/oci/layout.js';
import {
  DEFAULT_BINARIES,
  RUNSC_EGRESS_FLAG,
  runtimeInvocation,
  type RuntimeCommand,
} from '../../../../src/backends/oci/runtime-command.js';

const layout: OciLayout = {
  runDir: '/run/sandpit/oci',
  rootfsDir: '/cache/rootfs',
  cgroupRoot: '/sys/fs/cgroup',
};
const where = { layout, binaries: DEFAULT_BINARIES };
const RUN: RuntimeCommand = { kind: 'run', bundle: '/run/sandpit/oci/bundles/sandpit-r1', id: 'sandpit-r1' };

describe('the runtimes’ command lines', () => {
  test('runc: sandpit’s own state root, and run --keep in the foreground', () => {
    assert.deepEqual(runtimeInvocation('runc', RUN, where), {
      file: '/usr/sbin/runc',
      args: ['--root', '/run/sandpit/oci/runc', 'run', '--keep', '--bundle', RUN.bundle, 'sandpit-r1'],
    });
  });

  test('runsc: its own state root, ptrace, no network stack of its own, the seccomp profile inside', () => {
    assert.deepEqual(runtimeInvocation('runsc', RUN, where), {
      file: '/usr/bin/runsc',
      args: [
        '--root',
        '/run/sandpit/oci/runsc',
        '--platform=ptrace',
        '--network=none',
        '--oci-seccomp',
        'run',
        '--bundle',
        RUN.bundle,
        'sandpit-r1',
      ],
    });
  });

  test('an egress sandbox under runsc may connect to the host socket mounted into it (--host-uds=open), before the subcommand', () => {
    assert.equal(RUNSC_EGRESS_FLAG, '--host-uds=open');
    const { args } = runtimeInvocation('runsc', { ...RUN, egress: true }, where);
    assert.deepEqual(args, [
      '--root',
      '/run/sandpit/oci/runsc',
      '--platform=ptrace',
      '--network=none',
      '--oci-seccomp',
      '--host-uds=open',
      'run',
      '--bundle',
      RUN.bundle,
      'sandpit-r1',
    ]);
  });

  test('no other sandbox, and no other command, gets --host-uds', () => {
    const others: RuntimeCommand[] = [
      RUN,
      { ...RUN, egress: false },
      { kind: 'kill', id: 'sandpit-r1' },
      { kind: 'delete', id: 'sandpit-r1' },
      { kind: 'list' },
      { kind: 'version' },
    ];
    for (const command of others) {
      const { args } = runtimeInvocation('runsc', command, where);
      assert.ok(!args.some((a) => a.startsWith('--host-uds')), JSON.stringify(command));
    }
  });

  test('runc has no such flag: an egress sandbox under runc connects to the mounted socket as to any file', () => {
    assert.deepEqual(
      runtimeInvocation('runc', { ...RUN, egress: true }, where),
      runtimeInvocation('runc', RUN, where),
    );
  });

  test('kill, delete, list and version', () => {
    assert.deepEqual(runtimeInvocation('runc', { kind: 'kill', id: 'sandpit-r1' }, where).args.slice(2), [
      'kill',
      'sandpit-r1',
      'KILL',
    ]);
    assert.deepEqual(runtimeInvocation('runsc', { kind: 'delete', id: 'sandpit-r1' }, where).args.slice(-3), [
      'delete',
      '--force',
      'sandpit-r1',
    ]);
    assert.deepEqual(runtimeInvocation('runc', { kind: 'list' }, where).args.slice(2), [
      'list',
      '--format',
      'json',
    ]);
    assert.deepEqual(runtimeInvocation('runsc', { kind: 'version' }, where), {
      file: '/usr/bin/runsc',
      args: ['--version'],
    });
  });
});
