/**
 * The properties every runtime must keep, as one suite run once per runtime (runc, runsc): each
 * test fails if its property broke.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { makeBackend, runToEnd } from '../../support/docker.js';
import { engineStretch } from '../../support/timing.js';

/**
 * `runtime` undefined: the engine's default runtime (runc), which is also what the warm pools hold.
 * `make`: the backend under test (the oci tier runs the same cases against its own).
 */
export function coreCases(runtime?: 'runsc', make: () => Promise<SandboxBackend> = makeBackend): void {
  describe(`core properties (${runtime ?? 'default runtime'})`, () => {
    let backend: SandboxBackend;
    /** How much slower than an idle machine the engine is now: the deadline's slack stretches by it. */
    let slow = 1;
    const opts = runtime ? { defaultRuntime: runtime, allowedRuntimes: [runtime] } : {};
    before(async () => {
      backend = await make();
      slow = await engineStretch(backend);
    });
    after(() => backend.close());

    test('python prints hello', async () => {
      const r = await runToEnd(backend, { template: 'python', code: 'print("hello")' }, opts);
      assert.equal(r.phase, 'Succeeded');
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout, 'hello\n');
      assert.equal(r.runtime, runtime);
    });

    test('the exit code and stdin pass through', async () => {
      const r = await runToEnd(
        backend,
        {
          template: 'python',
          code: 'import sys\ndata = sys.stdin.read()\nprint(data.upper(), end="")\nsys.exit(42)',
          stdin: 'from stdin\n',
        },
        opts,
      );
      assert.equal(r.phase, 'Failed');
      assert.equal(r.reason, 'Error');
      assert.equal(r.exitCode, 42);
      assert.equal(r.stdout, 'FROM STDIN\n');
    });

    test('a 2 s deadline ends an endless loop within 4 s of wall time (on an idle machine)', async () => {
      const t0 = performance.now();
      const r = await runToEnd(
        backend,
        { template: 'python', code: 'while True:\n    pass', timeoutSeconds: 2 },
        opts,
      );
      const wall = performance.now() - t0;
      assert.equal(r.phase, 'TimedOut');
      assert.equal(r.reason, 'DeadlineExceeded');
      assert.equal(r.timedOut, true);
      assert.ok(
        wall < 2000 + 2000 * slow,
        `took ${wall.toFixed(0)} ms (engine ${slow.toFixed(1)}× slower than idle)`,
      );
      assert.ok(r.durationMs >= 1900, `ended too early: ${r.durationMs} ms`);
    });

    test('no network: only lo, no default route, and a name lookup fails without sending a packet', async () => {
      const code = [
        'import os, socket',
        // gVisor has no /sys/class/net; the kernel's own interface list is asked in both runtimes.
        'print(sorted(n for _, n in socket.if_nameindex()))',
        'if os.path.isdir("/sys/class/net"): print(sorted(os.listdir("/sys/class/net")))',
        'else: print(["lo"])',
        'def routes(path):',
        '    if not os.path.exists(path): return []',
        '    with open(path) as f: return f.read().splitlines()',
        'v4 = [l.split() for l in routes("/proc/net/route")[1:]]',
        'print("v4 default", any(r[1] == "00000000" for r in v4))',
        // An IPv6 ::/0 entry on lo with RTF_REJECT (0x0200) is the kernel's unreachable route, not a way out.
        'v6 = [l.split() for l in routes("/proc/net/ipv6_route")]',
        'print("v6 default", any(r[0] == "0" * 32 and r[1] == "00" and not int(r[8], 16) & 0x200 for r in v6))',
        'def tx():',
        '    rows = [l.split(":", 1)[1].split() for l in open("/proc/net/dev").read().splitlines()[2:]]',
        '    return sum(int(r[9]) for r in rows)',
        'before = tx()',
        'try:',
        '    socket.getaddrinfo("example.com", 443)',
        '    print("lookup succeeded")',
        'except socket.gaierror as e:',
        '    print("lookup failed")',
        'print("packets", tx() - before)',
      ].join('\n');
      const r = await runToEnd(backend, { template: 'python', code }, opts);
      assert.equal(r.phase, 'Succeeded', r.stderr);
      assert.equal(
        r.stdout,
        "['lo']\n['lo']\nv4 default False\nv6 default False\nlookup failed\npackets 0\n",
      );
    });

    test('a program that fails on a name lookup gets the hint that the sandbox has no network', async () => {
      const r = await runToEnd(
        backend,
        { template: 'python', code: 'import socket\nsocket.getaddrinfo("pypi.org", 443)' },
        opts,
      );
      assert.equal(r.phase, 'Failed');
      assert.match(r.stderr, /socket\.gaierror/);
      assert.equal(r.hint, 'this sandbox has no network (egress: none)', r.stderr);
    });

    test('the rootfs is read-only, the uid is 1000, CapEff is zero and NoNewPrivs is set', async () => {
      const code = [
        'import os',
        'try:',
        // /home/sandbox belongs to uid 1000, so only a read-only rootfs can refuse this write.
        '    open("/home/sandbox/probe", "w")',
        '    print("rootfs writable")',
        'except OSError as e:',
        '    print("rootfs", e.strerror)',
        'print("uid", os.getuid(), os.getgid())',
        'status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)',
        // prctl(PR_GET_NO_NEW_PRIVS): gVisor does not print NoNewPrivs in /proc/self/status.
        'import ctypes',
        'nnp = ctypes.CDLL(None, use_errno=True).prctl(39, 0, 0, 0, 0)',
        'print("CapEff", status["CapEff"].strip(), "CapPrm", status["CapPrm"].strip(), "NoNewPrivs", nnp)',
      ].join('\n');
      const r = await runToEnd(backend, { template: 'python', code }, opts);
      assert.equal(r.phase, 'Succeeded', r.stderr);
      assert.equal(
        r.stdout,
        'rootfs Read-only file system\nuid 1000 1000\nCapEff 0000000000000000 CapPrm 0000000000000000 NoNewPrivs 1\n',
      );
    });

    test('the code file cannot be changed by the program', async () => {
      const code = [
        'import os',
        'for mode in ("a", "w", "r+"):',
        '    try:',
        '        with open(__file__, mode) as f: f.write("x")',
        '        print(mode, "written")',
        '    except OSError as e:',
        '        print(mode, "refused")',
        'print(open(__file__).read().count("refused"))',
      ].join('\n');
      const r = await runToEnd(backend, { template: 'python', code }, opts);
      assert.equal(r.phase, 'Succeeded', r.stderr);
      assert.equal(r.stdout, 'a refused\nw refused\nr+ refused\n2\n');
    });

    test('sandpit’s seccomp profile is in force: io_uring and namespaces other than gVisor’s are refused', async () => {
      const code = [
        'import ctypes, os',
        'libc = ctypes.CDLL(None, use_errno=True)',
        'def call(name, nr, *args):',
        '    r = libc.syscall(nr, *args)',
        '    if r == 0: os._exit(0)  # a clone that worked: the child leaves at once',
        '    print(name, "allowed" if r > 0 else os.strerror(ctypes.get_errno()))',
        'call("io_uring_setup", 425, 4, ctypes.create_string_buffer(120))',
        'call("clone(CLONE_NEWNS)", 56, 0x20000 | 17, 0, 0, 0, 0)',
        'call("clone(CLONE_NEWNET)", 56, 0x40000000 | 17, 0, 0, 0, 0)',
        'print("Seccomp", [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")])',
      ].join('\n');
      const r = await runToEnd(backend, { template: 'python', code }, opts);
      assert.equal(r.phase, 'Succeeded', r.stderr);
      assert.equal(
        r.stdout,
        'io_uring_setup Operation not permitted\nclone(CLONE_NEWNS) Operation not permitted\n' +
          "clone(CLONE_NEWNET) Operation not permitted\nSeccomp ['2']\n",
        runtime === 'runsc'
          ? 'under gVisor the profile needs runsc --oci-seccomp: run `bash scripts/docker-engine.sh up`'
          : undefined,
      );
    });
  });
}
