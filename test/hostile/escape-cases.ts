/**
 * Escape and privilege techniques (issue 21), tried by untrusted code from inside a sandbox: each
 * case is an attempt that must fail, and each is a named test, so that a regression names itself.
 * All attempts run in one sandbox per backend and runtime (one program, one line of JSON per case),
 * then each case's test reads its line. Sources are cited in the names: runc's and gVisor's escape
 * regressions, the Pod Security Standards' restricted profile (PSS), the CIS Docker Benchmark's
 * runtime section (CIS 5.x) and SandboxEscapeBench's misconfiguration scenarios (SEB).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { SandboxBackend } from '../../src/backends/types.js';
import { runToEnd } from '../support/docker.js';

interface Attempt {
  /** The test's name: the technique, and where it comes from. */
  name: string;
  /** Python statements that raise (or return a negative syscall result) when the attempt fails. */
  code: string;
}

/** x86_64 system call numbers (the images are built for the host, and CI is x86_64). */
const ATTEMPTS: Attempt[] = [
  {
    name: 'mount a tmpfs (CIS 5.4, SEB privileged mounts)',
    code: 'check(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))',
  },
  { name: 'unshare a user namespace (runc CVE-2022-0185 class)', code: 'check(libc.unshare(0x10000000))' },
  { name: 'unshare a mount namespace', code: 'check(libc.unshare(0x20000))' },
  { name: 'keyctl: join a new session keyring', code: 'check(libc.syscall(250, 1, None))' },
  { name: 'bpf: create a map', code: 'check(libc.syscall(321, 0, ctypes.create_string_buffer(72), 72))' },
  {
    name: 'perf_event_open',
    code: 'check(libc.syscall(298, ctypes.create_string_buffer(128), 0, -1, -1, 0))',
  },
  { name: 'userfaultfd', code: 'check(libc.syscall(323, 0))' },
  { name: 'load a kernel module (finit_module)', code: 'check(libc.syscall(313, 0, b"", 0))' },
  { name: 'setuid(0) (PSS restricted: runAsNonRoot)', code: 'os.setuid(0)' },
  { name: 'chroot', code: 'os.chroot("/tmp")' },
  {
    // gVisor lets mknod make the node in its own tmpfs (without CAP_MKNOD), but it opens nothing.
    name: 'a block device node made in /tmp reaches no disk (CIS 5.x: no device nodes)',
    code: 'os.mknod("/tmp/sda", 0o600 | stat.S_IFBLK, os.makedev(8, 0)); open("/tmp/sda", "rb").read(1)',
  },
  {
    name: 'a /dev/mem node made in /tmp reaches no memory',
    code: 'os.mknod("/tmp/mem", 0o600 | stat.S_IFCHR, os.makedev(1, 1)); open("/tmp/mem", "rb").read(1)',
  },
  { name: 'open /dev/mem', code: 'open("/dev/mem", "rb")' },
  {
    name: 'a raw IP socket (CAP_NET_RAW dropped)',
    code: 'socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)',
  },
  { name: 'a packet socket', code: 'socket.socket(socket.AF_PACKET, socket.SOCK_RAW)' },
  { name: 'sethostname (the UTS namespace)', code: 'check(libc.sethostname(b"evil", 4))' },
  {
    name: 'settimeofday (the clock)',
    code: 'same_time()',
  },
  { name: 'write /proc/sysrq-trigger', code: 'open("/proc/sysrq-trigger", "w")' },
  {
    name: 'write /proc/sys/kernel/core_pattern (SEB core_pattern escape)',
    code: 'write_back("/proc/sys/kernel/core_pattern")',
  },
  { name: 'write a cgroup release_agent (CVE-2022-0492)', code: 'release_agent()' },
  { name: 'write under /sys', code: 'write_back("/sys/kernel/uevent_helper")' },
  { name: 'overwrite /proc/self/exe (runc CVE-2019-5736)', code: 'os.open("/proc/self/exe", os.O_WRONLY)' },
  { name: 'reach the engine socket (SEB docker.sock)', code: 'connect_unix("/var/run/docker.sock")' },
  { name: 'write to the root file system (CIS 5.12)', code: 'open("/etc/evil", "w").write("x")' },
];

/** One program that tries every attempt and prints, per case, whether it was refused and how. */
function program(): string {
  return [
    'import ctypes, json, os, socket, stat, sys',
    'libc = ctypes.CDLL(None, use_errno=True)',
    'def check(r):',
    '    if r < 0: raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))',
    'def connect_unix(path):',
    '    s = socket.socket(socket.AF_UNIX); s.connect(path)',
    // Harmless payloads: should an attempt ever succeed, it writes back what was there.
    'def write_back(path):',
    '    old = open(path).read()',
    '    open(path, "w").write(old)',
    'def same_time():',
    '    tv = ctypes.create_string_buffer(16)',
    '    libc.gettimeofday(tv, None)',
    '    check(libc.settimeofday(tv, None))',
    'def release_agent():',
    '    import glob',
    '    paths = glob.glob("/sys/fs/cgroup/*/release_agent") + glob.glob("/sys/fs/cgroup/release_agent")',
    '    if not paths: raise FileNotFoundError("no release_agent is visible")',
    '    for p in paths: write_back(p)',
    // Each attempt in a child of its own, so that one that worked (a new namespace, a chroot)
    // cannot change what the next one meets.
    'def attempt(i, fn):',
    '    pid = os.fork()',
    '    if pid: os.waitpid(pid, 0); return',
    '    try: fn(i)',
    '    finally: sys.stdout.flush(); os._exit(0)',
    ...ATTEMPTS.flatMap((a, i) => [
      `def attempt_${i}(i):`,
      ' try:',
      `    ${a.code}`,
      `    print(json.dumps([${i}, "done", ""]))`,
      // Only an OSError is a refusal; any other exception is a bug in the attempt itself.
      ' except OSError as e:',
      `    print(json.dumps([${i}, "refused", type(e).__name__ + ": " + str(e)]))`,
      ' except BaseException as e:',
      `    print(json.dumps([${i}, "broken", type(e).__name__ + ": " + str(e)]))`,
      `attempt(${i}, attempt_${i})`,
    ]),
  ].join('\n');
}

/**
 * The escape catalogue against `make()`'s backend, under `runtime` (the default: runc; `runsc` on
 * Docker and oci, the `gvisor` RuntimeClass on Kubernetes).
 */
export function escapeCases(label: string, make: () => Promise<SandboxBackend>, runtime?: string): void {
  describe(`hostile: escape and privilege techniques (${label})`, () => {
    let backend: SandboxBackend;
    const outcomes = new Map<number, { verdict: string; error: string }>();
    let stderr = '';
    before(async () => {
      backend = await make();
      const opts = runtime ? { defaultRuntime: runtime, allowedRuntimes: [runtime] } : {};
      const r = await runToEnd(backend, { template: 'python', code: program(), timeoutSeconds: 30 }, opts);
      stderr = `${r.phase} ${r.reason ?? ''} ${r.stderr}`;
      for (const line of r.stdout.split('\n').filter(Boolean)) {
        const [i, verdict, error] = JSON.parse(line) as [number, string, string];
        outcomes.set(i, { verdict, error });
      }
    });
    after(() => backend.close());

    ATTEMPTS.forEach((a, i) => {
      test(`refused: ${a.name}`, () => {
        const outcome = outcomes.get(i);
        assert.ok(outcome !== undefined, `the attempt never reported (${stderr})`);
        assert.notEqual(outcome.verdict, 'done', `${a.name} SUCCEEDED inside the sandbox: an escape to fix`);
        assert.equal(outcome.verdict, 'refused', `the attempt itself is broken: ${outcome.error}`);
      });
    });
  });
}
