import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareKernel, goArch, toOciSeccomp } from '../../../../src/backends/oci/seccomp.js';
import type { SeccompProfile } from '../../../../src/policy/seccomp.js';

const profile: SeccompProfile = {
  defaultAction: 'SCMP_ACT_ERRNO',
  archMap: [
    { architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86', 'SCMP_ARCH_X32'] },
    { architecture: 'SCMP_ARCH_AARCH64', subArchitectures: ['SCMP_ARCH_ARM'] },
  ],
  syscalls: [
    { names: ['read'], action: 'SCMP_ACT_ALLOW', args: [], includes: {}, excludes: {} },
    { names: ['new'], action: 'SCMP_ACT_ALLOW', args: null, includes: { minKernel: '6.20' }, excludes: {} },
    { names: ['old'], action: 'SCMP_ACT_ALLOW', args: null, includes: { minKernel: '4.8' }, excludes: {} },
    { names: ['arm'], action: 'SCMP_ACT_ALLOW', args: [], includes: { arches: ['arm64'] }, excludes: {} },
    { names: ['admin'], action: 'SCMP_ACT_ALLOW', args: [], includes: { caps: ['CAP_SYS_ADMIN'] } },
    {
      names: ['clone'],
      action: 'SCMP_ACT_ALLOW',
      args: [{ index: 0, value: 2114060288, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }],
      excludes: { caps: ['CAP_SYS_ADMIN'], arches: ['s390x'] },
    },
    { names: ['nope'], action: 'SCMP_ACT_ERRNO', errnoRet: 38, args: [], excludes: { arches: ['amd64'] } },
  ],
};

test('only the rules whose conditions hold for this host and a sandbox without capabilities', () => {
  const oci = toOciSeccomp(profile, { arch: 'amd64', kernel: '6.18.44-fc' });
  assert.deepEqual(oci, {
    defaultAction: 'SCMP_ACT_ERRNO',
    architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'],
    syscalls: [
      { names: ['read'], action: 'SCMP_ACT_ALLOW' },
      { names: ['old'], action: 'SCMP_ACT_ALLOW' },
      {
        names: ['clone'],
        action: 'SCMP_ACT_ALLOW',
        args: [{ index: 0, value: 2114060288, op: 'SCMP_CMP_MASKED_EQ' }],
      },
    ],
  });
});

test('another architecture gets its own rules and sub-architectures', () => {
  const oci = toOciSeccomp(profile, { arch: 'arm64', kernel: '6.21', capabilities: ['CAP_SYS_ADMIN'] });
  assert.deepEqual(oci.architectures, ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']);
  assert.deepEqual(
    oci.syscalls.map((r) => r.names[0]),
    ['read', 'new', 'old', 'arm', 'admin', 'nope'],
  );
});

test('kernel releases compare by number', () => {
  assert.ok(compareKernel('6.18.44-fc-v657', '4.8') > 0);
  assert.ok(compareKernel('4.8', '4.8.0') === 0);
  assert.ok(compareKernel('4.19', '4.8') > 0);
  assert.ok(compareKernel('3.10.0-1160.el7', '4.8') < 0);
});

test('node’s architecture names become Go’s', () => {
  assert.equal(goArch('x64'), 'amd64');
  assert.equal(goArch('arm64'), 'arm64');
});
