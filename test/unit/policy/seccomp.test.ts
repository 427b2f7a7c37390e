import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import dockerDefault from '../../../src/policy/seccomp/docker-default-20.10.json' with { type: 'json' };
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  buildSeccompProfile,
  CLONE_NAMESPACE_FLAGS,
  generatedSeccompFiles,
  withoutConditions,
  IO_URING_SYSCALLS,
  SECCOMP_PROFILE_FILES,
  TRACE_SYSCALLS,
  type SeccompProfile,
} from '../../../src/policy/seccomp.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');

const names = (p: SeccompProfile): string[] => p.syscalls.flatMap((r) => r.names);
/** The rules that let clone(2) through without CAP_SYS_ADMIN on x86-64 (flags in argument 0). */
const cloneRules = (p: SeccompProfile) =>
  p.syscalls.filter((r) => r.names.includes('clone') && r.args?.[0]?.index === 0);

const listOf = (r: SeccompProfile['syscalls'][number], key: 'arches' | 'caps') =>
  (r.includes?.[key] as string[] | undefined) ?? [];

describe('buildSeccompProfile', () => {
  for (const gvisor of [false, true]) {
    test(`${gvisor ? 'gVisor' : 'runc'}: Docker's default without io_uring, and ptrace only with CAP_SYS_PTRACE; everything else kept`, () => {
      const profile = buildSeccompProfile({ gvisor });
      const base = dockerDefault as SeccompProfile;
      for (const name of IO_URING_SYSCALLS) {
        assert.ok(names(base).includes(name), `Docker 20.10's profile allows ${name}`);
        assert.ok(!names(profile).includes(name), `${name} is refused`);
      }
      const capsOf = (r: SeccompProfile['syscalls'][number]) =>
        (r.includes?.caps as string[] | undefined) ?? [];
      for (const name of TRACE_SYSCALLS) {
        const allowing = (p: SeccompProfile) => p.syscalls.filter((r) => r.names.includes(name)).map(capsOf);
        assert.ok(
          allowing(base).some((caps) => caps.length === 0),
          `Docker 20.10 allows ${name} to everyone`,
        );
        assert.deepEqual(allowing(profile), [['CAP_SYS_PTRACE']], `${name} only with CAP_SYS_PTRACE`);
        assert.ok(!names(withoutConditions(profile)).includes(name), `no pod gets ${name}`);
      }
      assert.equal(profile.defaultAction, 'SCMP_ACT_ERRNO');
      assert.deepEqual(profile.archMap, base.archMap);
      const kept = base.syscalls.flatMap((r) =>
        r.names.filter(
          (n) =>
            !(IO_URING_SYSCALLS as readonly string[]).includes(n) &&
            !((TRACE_SYSCALLS as readonly string[]).includes(n) && capsOf(r).length === 0),
        ),
      );
      assert.deepEqual(names(profile), kept);
    });
  }

  test('runc: clone(2) creates no namespace, as in Docker’s profile', () => {
    const [rule] = cloneRules(buildSeccompProfile({ gvisor: false }));
    assert.deepEqual(rule?.args, [{ index: 0, value: CLONE_NAMESPACE_FLAGS, op: 'SCMP_CMP_MASKED_EQ' }]);
  });

  test('gVisor: clone(2) may create a user and a PID namespace, and no other', () => {
    const [rule] = cloneRules(buildSeccompProfile({ gvisor: true }));
    const mask = rule?.args?.[0]?.value ?? 0;
    const flags = {
      NEWNS: 0x20000,
      NEWCGROUP: 0x2000000,
      NEWUTS: 0x4000000,
      NEWIPC: 0x8000000,
      NEWNET: 0x40000000,
    };
    for (const [name, flag] of Object.entries(flags)) assert.ok(mask & flag, `CLONE_${name} stays refused`);
    assert.equal(mask & 0x10000000, 0, 'CLONE_NEWUSER is allowed');
    assert.equal(mask & 0x20000000, 0, 'CLONE_NEWPID is allowed');
  });

  test('clone3(2) fails with ENOSYS so that glibc falls back to clone(2): by errnoRet under runc, by SCMP_ACT_TRACE (no tracer) under gVisor, whose runsc ignores errnoRet', () => {
    // The rules for clone3 that apply to a sandbox (no capability) on amd64 or arm64.
    const clone3 = (p: SeccompProfile) =>
      p.syscalls.filter(
        (r) => r.names.includes('clone3') && !listOf(r, 'arches').length && !listOf(r, 'caps').length,
      );
    assert.deepEqual(
      clone3(buildSeccompProfile({ gvisor: false })).map((r) => [r.action, r.errnoRet]),
      [['SCMP_ACT_ERRNO', 38]],
    );
    const gvisor = clone3(buildSeccompProfile({ gvisor: true }));
    assert.deepEqual(
      gvisor.map((r) => [r.action, r.errnoRet]),
      [['SCMP_ACT_TRACE', undefined]],
    );
    // Still only where Docker's rule applies: a sandbox without CAP_SYS_ADMIN.
    assert.deepEqual(gvisor[0]?.excludes?.caps, ['CAP_SYS_ADMIN']);
    const pod = clone3(withoutConditions(buildSeccompProfile({ gvisor: true })));
    assert.deepEqual(
      pod.map((r) => r.action),
      ['SCMP_ACT_TRACE'],
    );
  });

  test('each call builds a fresh profile: callers cannot change the next one', () => {
    const a = buildSeccompProfile({ gvisor: false });
    a.syscalls.length = 0;
    assert.ok(buildSeccompProfile({ gvisor: false }).syscalls.length > 0);
  });

  test("the chart's profile files are the generated ones (npm run gen:crd), one per localhost profile", () => {
    const files = generatedSeccompFiles();
    assert.deepEqual(
      files.map((f) => path.basename(f.path)).sort(),
      Object.values(SECCOMP_PROFILE_FILES)
        .map((p) => path.basename(p))
        .sort(),
    );
    for (const f of files) {
      assert.equal(
        readFileSync(path.join(ROOT, f.path), 'utf8'),
        f.text,
        `${f.path} is out of date: npm run gen:crd`,
      );
      const parsed = JSON.parse(f.text) as SeccompProfile;
      assert.deepEqual(
        parsed,
        withoutConditions(buildSeccompProfile({ gvisor: f.path.endsWith('gvisor.json') })),
      );
    }
  });

  test("the kubelet's files decide every capability condition for a pod without capabilities", () => {
    for (const gvisor of [false, true]) {
      const flat = withoutConditions(buildSeccompProfile({ gvisor }));
      const allowed = new Set(
        flat.syscalls.filter((r) => r.action === 'SCMP_ACT_ALLOW').flatMap((r) => r.names),
      );
      for (const name of ['unshare', 'setns', 'mount', 'chroot', 'bpf', 'init_module', 'settimeofday']) {
        assert.equal(allowed.has(name), false, `${name} is allowed without its capability`);
      }
      for (const rule of flat.syscalls) {
        assert.equal((rule.includes as { caps?: unknown } | undefined)?.caps, undefined, rule.names.join());
        assert.equal((rule.excludes as { caps?: unknown } | undefined)?.caps, undefined, rule.names.join());
        const arches = (rule.includes as { arches?: string[] } | undefined)?.arches ?? [];
        assert.ok(!arches.some((a) => a.startsWith('s390') || a.startsWith('mips')), rule.names.join());
      }
      // clone(2) stays, limited by its flags as in Docker's rule for a container without CAP_SYS_ADMIN.
      const clone = flat.syscalls.filter((r) => r.names.includes('clone'));
      assert.equal(clone.length, 1);
      assert.equal(clone[0]?.args?.[0]?.op, 'SCMP_CMP_MASKED_EQ');
    }
  });
});
