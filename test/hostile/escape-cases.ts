/**
 * Escape and privilege techniques (issue 21), tried by untrusted code from inside a sandbox: each
 * case is an attempt that must fail, and each is a named test, so that a regression names itself.
 * All attempts run in one sandbox per configuration (one program, one line of JSON per case),
 * then each case's test reads its line. Sources are cited in the names: runc's and gVisor's escape
 * regressions, the Pod Security Standards' restricted profile (PSS), the CIS Docker Benchmark's
 * runtime section (CIS 5.x) and SandboxEscapeBench's misconfiguration scenarios (SEB).
 *
 * An attempt either must be refused (an OSError: anything else is a broken attempt, not a
 * refusal), or is a look around whose finding the test judges (`judge`: what it shows must be
 * harmless, e.g. no setuid file, no capability, nothing of the host's).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { configLabel, type HostileConfig, type Untrusted } from './untrusted.js';

/** What the test reads on the host, to compare with what the program could read. */
interface HostFacts {
  hostname: string;
  machineId: string;
}

function hostFacts(): HostFacts {
  const read = (p: string): string => {
    try {
      return readFileSync(p, 'utf8').trim();
    } catch {
      return '';
    }
  };
  return { hostname: read('/etc/hostname') || hostname(), machineId: read('/etc/machine-id') };
}

interface Attempt {
  /** The test's name: the technique, and where it comes from. */
  name: string;
  /**
   * Python statements. A refusal attempt raises an OSError when refused; a look around calls
   * shown(value) with what it found.
   */
  code: string;
  /** For a look around: what is wrong with what it showed, or undefined when it is harmless. */
  judge?: (shown: unknown, host: HostFacts) => string | undefined;
  /** A look around that may also be refused outright (an OSError). */
  refusable?: boolean;
  /**
   * Tried in a child of its own: one that worked would change the process (a namespace, a root,
   * an identity, a tracee) for the attempts after it. The others run in the program itself: a
   * fork costs about 0.1 s under gVisor.
   */
  isolated?: boolean;
}

/** The variables every sandbox image sets (images/Dockerfile's ENV line; images/build.sh writes the same). */
const IMAGE_ENV: string[] = (() => {
  const line = readFileSync(new URL('../../images/Dockerfile', import.meta.url), 'utf8')
    .split('\n')
    .find((l) => l.startsWith('ENV '));
  if (!line) throw new Error('images/Dockerfile sets no ENV');
  return line
    .slice(4)
    .trim()
    .split(/\s+/)
    .map((kv) => kv.split('=')[0] ?? '');
})();

/** gVisor has no ambient capabilities at all: its status has no CapAmb, and PR_CAP_AMBIENT is EINVAL. */
const AMBIENT_UNSUPPORTED = 'none: PR_CAP_AMBIENT is not supported';

const none = (what: string) => (shown: unknown) =>
  Array.isArray(shown) && shown.length === 0 ? undefined : `${what}: ${JSON.stringify(shown)}`;

/** x86_64 system call numbers (the images are built for the host, and CI is x86_64). */
const ATTEMPTS: Attempt[] = [
  {
    name: 'mount a tmpfs (CIS 5.4, SEB privileged mounts)',
    code: 'check(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))',
    isolated: true,
  },
  {
    name: 'unshare a user namespace (runc CVE-2022-0185 class)',
    code: 'check(libc.unshare(0x10000000))',
    isolated: true,
  },
  { name: 'unshare a mount namespace', code: 'check(libc.unshare(0x20000))', isolated: true },
  { name: 'unshare a time namespace (CLONE_NEWTIME)', code: 'check(libc.unshare(0x80))', isolated: true },
  { name: 'keyctl: join a new session keyring', code: 'check(libc.syscall(250, 1, None))', isolated: true },
  { name: 'bpf: create a map', code: 'check(libc.syscall(321, 0, ctypes.create_string_buffer(72), 72))' },
  {
    name: 'perf_event_open',
    code: 'check(libc.syscall(298, ctypes.create_string_buffer(128), 0, -1, -1, 0))',
  },
  { name: 'userfaultfd', code: 'check(libc.syscall(323, 0))' },
  {
    name: 'io_uring_setup (syscall 425; gVisor and Docker advisories)',
    code: 'check(libc.syscall(425, 1, ctypes.create_string_buffer(120)))',
  },
  { name: 'load a kernel module (finit_module)', code: 'check(libc.syscall(313, 0, b"", 0))' },
  { name: 'setuid(0) (PSS restricted: runAsNonRoot)', code: 'os.setuid(0)', isolated: true },
  {
    name: 'not root: no uid or gid 0, real, effective or saved, nor in the groups (PSS restricted: runAsNonRoot)',
    code: 'shown(list(os.getresuid()) + list(os.getresgid()) + os.getgroups())',
    judge: (ids) =>
      Array.isArray(ids) && ids.length >= 6 && !ids.includes(0) ? undefined : `ids ${JSON.stringify(ids)}`,
  },
  {
    name: 'no setuid or setgid file in the image (CIS 5.x, SEB setuid binaries)',
    code: 'shown(IMAGE["setid"])',
    judge: none('setuid or setgid files'),
  },
  {
    name: 'a setuid-root copy cannot be made: chown of a copied binary to root',
    code: 'shutil.copy("/bin/true", "/tmp/suid"); os.chmod("/tmp/suid", 0o4755); os.chown("/tmp/suid", 0, 0)',
  },
  {
    name: 'no file in the image carries a file capability (security.capability)',
    code: 'shown(IMAGE["caps"])',
    judge: none('files with capabilities'),
  },
  {
    name: 'setcap: give a copied binary a file capability',
    // A VFS_CAP_REVISION_2 xattr granting CAP_SETUID, permitted and effective.
    code: 'shutil.copy("/bin/true", "/tmp/cap"); os.setxattr("/tmp/cap", "security.capability", struct.pack("<IIIII", 0x02000001, 1 << 7, 0, 0, 0))',
  },
  {
    name: 'no capabilities: CapEff, CapPrm, CapBnd and CapAmb all 0 (PSS restricted: drop ALL, CIS 5.3)',
    code: 'shown({**{k: status(k) for k in ("CapEff", "CapPrm", "CapBnd")}, "CapAmb": ambient()})',
    judge: (caps) => {
      const c = caps as Record<string, string | null>;
      const bad = ['CapEff', 'CapPrm', 'CapBnd', 'CapAmb'].filter(
        (k) => !/^0+$/.test(c[k] ?? '') && !(k === 'CapAmb' && c[k] === AMBIENT_UNSUPPORTED),
      );
      return bad.length === 0 ? undefined : `not all zero: ${JSON.stringify(caps)}`;
    },
  },
  {
    name: 'no_new_privs is set: NoNewPrivs 1 (PSS restricted: allowPrivilegeEscalation false, CIS 5.25)',
    // prctl(PR_GET_NO_NEW_PRIVS): gVisor's /proc/self/status has no NoNewPrivs line.
    code: 'shown(libc.prctl(39, 0, 0, 0, 0))',
    judge: (v) => (v === 1 ? undefined : `PR_GET_NO_NEW_PRIVS ${JSON.stringify(v)}`),
  },
  {
    name: 'a seccomp filter is in force: Seccomp 2 (PSS restricted: RuntimeDefault, CIS 5.21)',
    code: 'shown(status("Seccomp"))',
    judge: (v) => (v === '2' ? undefined : `Seccomp ${JSON.stringify(v)}`),
  },
  { name: 'chroot', code: 'os.chroot("/tmp")', isolated: true },
  {
    name: 'ptrace: PTRACE_ATTACH to a sibling process',
    code: 'check(libc.ptrace(16, SIBLING, None, None))',
    isolated: true,
  },
  {
    name: 'ptrace: PTRACE_ATTACH to PID 1 and the runner',
    code: 'every(RUNNER, lambda pid: check(libc.ptrace(16, pid, None, None)))',
    isolated: true,
  },
  {
    // runc refuses (the runner is not dumpable); gVisor lets the program read it, so what it shows
    // must be no more than the program has anyway: its own variables, the image's, the hostname,
    // and on Kubernetes the API's service address, which the kubelet gives every container
    // whatever enableServiceLinks says (no secret: the same for every pod, and unreachable).
    name: 'the runner’s environment (/proc/1/environ): refused, or only the image’s variables and the program’s own',
    code: 'shown(runner_env())',
    refusable: true,
    judge: (seen) => {
      const allowed = new Set([...IMAGE_ENV, 'HOSTNAME']);
      const extra = Object.entries(seen as Record<string, string[]>).flatMap(([pid, names]) =>
        names
          .filter((n) => !allowed.has(n) && !/^KUBERNETES_(SERVICE|PORT)/.test(n))
          .map((n) => `${pid}: ${n}`),
      );
      return extra.length ? `variables beyond the image's and its own: ${extra.join(', ')}` : undefined;
    },
  },
  {
    // Opening it is the permission check (ptrace access): an open that works is the escape.
    name: 'open /proc/<pid>/mem of PID 1 and the runner',
    code: 'every(RUNNER, lambda pid: open(f"/proc/{pid}/mem", "rb"))',
  },
  {
    name: 'host paths through /proc/*/root: only its own root, and not the host’s hostname or machine-id (SEB)',
    code: 'shown(proc_roots())',
    judge: (found, host) => {
      const f = found as { outside: string[]; read: Record<string, string> };
      if (f.outside.length) return `roots outside its own: ${f.outside.join(', ')}`;
      const hostValues = [host.hostname, host.machineId].filter(Boolean);
      const leaked = Object.entries(f.read).filter(([, v]) => hostValues.includes(v.trim()));
      return leaked.length ? `the host's files: ${JSON.stringify(leaked)}` : undefined;
    },
  },
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
  {
    name: 'write its own cgroup.procs (SEB cgroup escapes)',
    code: 'write_cgroup(("cgroup.procs",), str(os.getpid()))',
  },
  {
    name: 'write its own memory limit (memory.limit_in_bytes, memory.max)',
    code: 'write_cgroup(("memory.limit_in_bytes", "memory.max"))',
  },
  { name: 'write its own pids.max', code: 'write_cgroup(("pids.max",))' },
  { name: 'write under /sys', code: 'write_back("/sys/kernel/uevent_helper")' },
  { name: 'overwrite /proc/self/exe (runc CVE-2019-5736)', code: 'os.open("/proc/self/exe", os.O_WRONLY)' },
  { name: 'reach the engine socket (SEB docker.sock)', code: 'connect_unix("/var/run/docker.sock")' },
  { name: 'write to the root file system (CIS 5.12)', code: 'open("/etc/evil", "w").write("x")' },
];

/** One program that tries every attempt and prints, per case, what came of it. */
function program(): string {
  return [
    'import ctypes, errno, json, os, shutil, signal, socket, stat, struct, sys, time',
    'libc = ctypes.CDLL(None, use_errno=True)',
    'libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]',
    'class Shown(Exception): pass',
    'def shown(v): raise Shown(v)',
    'def check(r):',
    '    if r < 0: raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))',
    'def connect_unix(path):',
    '    s = socket.socket(socket.AF_UNIX); s.connect(path)',
    'def status(key):',
    '    for line in open("/proc/self/status"):',
    '        k, _, v = line.partition(":")',
    '        if k == key: return v.strip()',
    '    return None',
    // The ambient set: /proc/self/status, or prctl(PR_CAP_AMBIENT_IS_SET) for each capability.
    'def ambient():',
    '    v = status("CapAmb")',
    '    if v is not None: return v',
    '    r = [(libc.prctl(47, 1, c, 0, 0), ctypes.get_errno()) for c in range(64)]',
    '    if all(x == 0 for x, _ in r): return "0"',
    `    if all(x == -1 and e == errno.EINVAL for x, e in r): return "${AMBIENT_UNSUPPORTED}"`,
    '    return "set: " + str([c for c, (x, _) in enumerate(r) if x != 0])',
    // What the runners' environments hold that the program's own does not: names only.
    'def runner_env():',
    '    own = {f"{k}={v}".encode() for k, v in os.environ.items()}',
    '    seen, last = {}, None',
    '    for pid in RUNNER:',
    '        try: env = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")',
    '        except OSError as e: last = e; continue',
    '        seen[pid] = sorted({v.split(b"=")[0].decode(errors="replace") for v in env if v and v not in own})',
    '    if not seen: raise last',
    '    return seen',
    // Harmless payloads: should an attempt ever succeed, it writes back what was there.
    'def write_back(path, value=None):',
    '    old = open(path).read()',
    '    open(path, "w").write(old if value is None else value)',
    'def same_time():',
    '    tv = ctypes.create_string_buffer(16)',
    '    libc.gettimeofday(tv, None)',
    '    check(libc.settimeofday(tv, None))',
    'def release_agent():',
    '    import glob',
    '    paths = glob.glob("/sys/fs/cgroup/*/release_agent") + glob.glob("/sys/fs/cgroup/release_agent")',
    '    if not paths: raise FileNotFoundError("no release_agent is visible")',
    '    for p in paths: write_back(p)',
    // Its own cgroup's files, in every hierarchy it can see (v1 per controller, or v2): each
    // write must fail; none visible is a refusal too (there is nothing to write).
    'def write_cgroup(names, value=None):',
    '    import glob',
    '    paths = [p for n in names for p in glob.glob("/sys/fs/cgroup/" + n) + glob.glob("/sys/fs/cgroup/*/" + n)]',
    '    if not paths: raise FileNotFoundError("none of %s is visible" % (names,))',
    '    every(paths, lambda p: write_back(p, value))',
    // Tries fn on every item: done when any worked, else the last refusal.
    'def every(items, fn):',
    '    worked, last = [], None',
    '    for x in items:',
    '        try: fn(x); worked.append(x)',
    '        except OSError as e: last = e',
    '    if worked: print(json.dumps(["worked", str(worked)]), file=sys.stderr); return',
    '    raise last',
    // Every process's root as the program can reach it: any other than its own is outside its
    // rootfs; and the hostname and machine-id files read through each, to compare with the host's.
    'def proc_roots():',
    '    own = os.stat("/")',
    '    outside, read = [], {}',
    '    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:',
    '        try: st = os.stat(f"/proc/{pid}/root/")',
    '        except OSError: continue',
    '        if (st.st_dev, st.st_ino) != (own.st_dev, own.st_ino): outside.append(pid)',
    '        for f in ("etc/hostname", "etc/machine-id"):',
    '            try: read[f"{pid}/{f}"] = open(f"/proc/{pid}/root/{f}").read(200)',
    '            except OSError: pass',
    '    return {"outside": outside, "read": read}',
    // The image's setuid/setgid files and files with capabilities, walked once (not /proc, /sys, /dev).
    'def walk_image():',
    '    setid, caps = [], []',
    '    for root, dirs, files in os.walk("/"):',
    '        if root == "/": dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]',
    '        for f in files:',
    '            p = os.path.join(root, f)',
    '            try: st = os.lstat(p)',
    '            except OSError: continue',
    '            if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID): setid.append(p)',
    '            try: os.getxattr(p, "security.capability", follow_symlinks=False); caps.append(p)',
    '            except OSError: pass',
    '    return {"setid": setid[:20], "caps": caps[:20]}',
    'IMAGE = walk_image()',
    // The runner: PID 1, and every process whose command line names sandpit-runner.
    'def cmdline(pid):',
    '    try: return open(f"/proc/{pid}/cmdline", "rb").read()',
    '    except OSError: return b""',
    'RUNNER = sorted({1} | {int(p) for p in os.listdir("/proc") if p.isdigit() and b"sandpit-runner" in cmdline(p)})',
    // A sibling of every attempt's process, for ptrace to try.
    'SIBLING = os.fork()',
    'if SIBLING == 0:',
    '    time.sleep(60); os._exit(0)',
    'def attempt(i, fn):',
    '    pid = os.fork()',
    '    if pid: os.waitpid(pid, 0); return',
    '    try: fn(i)',
    '    finally: sys.stdout.flush(); os._exit(0)',
    'def report(i, verdict, detail):',
    '    print(json.dumps([i, verdict, detail]))',
    ...ATTEMPTS.flatMap((a, i) => [
      `def attempt_${i}(i):`,
      ' try:',
      `    ${a.code}`,
      `    report(${i}, "done", "")`,
      ' except Shown as s:',
      `    report(${i}, "shown", s.args[0])`,
      // Only an OSError is a refusal; any other exception is a bug in the attempt itself.
      ' except OSError as e:',
      `    report(${i}, "refused", (type(e).__name__ + ": " + str(e))[:200])`,
      ' except BaseException as e:',
      `    report(${i}, "broken", (type(e).__name__ + ": " + str(e))[:200])`,
      a.isolated ? `attempt(${i}, attempt_${i})` : `attempt_${i}(${i})`,
    ]),
    'os.kill(SIBLING, signal.SIGKILL); os.waitpid(SIBLING, 0)',
  ].join('\n');
}

/** How long the program's sandboxes may take to be gone after its result. */
const LEFTOVERS_MS = 30_000;

/** The escape catalogue in one configuration: `make()` gives its target. */
export function escapeCases(config: HostileConfig, make: () => Promise<Untrusted>): void {
  describe(`hostile: escape and privilege techniques (${configLabel(config)})`, () => {
    let target: Untrusted;
    const host = hostFacts();
    const outcomes = new Map<number, { verdict: string; detail: unknown }>();
    let summary = '';
    before(async () => {
      target = await make();
      const r = await target.run({ template: 'python', code: program(), timeoutSeconds: 30 });
      summary = `${r.phase} ${r.reason ?? ''} ${r.stderr.slice(0, 2000)}`;
      for (const line of r.stdout.split('\n').filter((l) => l.startsWith('['))) {
        const [i, verdict, detail] = JSON.parse(line) as [number, string, unknown];
        outcomes.set(i, { verdict, detail });
      }
    });
    after(() => target?.close());

    ATTEMPTS.forEach((a, i) => {
      test(a.judge ? `contained: ${a.name}` : `refused: ${a.name}`, () => {
        const outcome = outcomes.get(i);
        assert.ok(outcome !== undefined, `the attempt never reported (${summary})`);
        assert.notEqual(outcome.verdict, 'done', `${a.name} SUCCEEDED inside the sandbox: an escape to fix`);
        if (a.judge) {
          if (a.refusable && outcome.verdict === 'refused') return;
          assert.equal(
            outcome.verdict,
            'shown',
            `the look around is broken: ${JSON.stringify(outcome.detail)}`,
          );
          const wrong = a.judge(outcome.detail, host);
          assert.equal(wrong, undefined, `${a.name}: ${wrong}`);
        } else {
          assert.equal(
            outcome.verdict,
            'refused',
            `the attempt is broken or escaped: ${JSON.stringify(outcome.detail)}`,
          );
        }
      });
    });

    test('nothing of the program is left: its sandbox is gone', async () => {
      const deadline = Date.now() + LEFTOVERS_MS;
      let left = await target.leftovers();
      while (left.length > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        left = await target.leftovers();
      }
      assert.deepEqual(left, [], `still there after ${LEFTOVERS_MS} ms`);
    });
  });
}
