/**
 * The resource bombs' programs (Python): each reports what it saw from inside as lines of JSON,
 * `{"case": …}`, on stdout, for bomb-cases.ts to judge. Several bombs share one program where they
 * cannot disturb each other, so that the catalogue costs few sandboxes: each bomb runs in a child
 * process of its own and reports through a pipe, and frees what it took before the next begins.
 */

const MiB = 1024 ** 2;

/** The size of each long line (stdout and stderr): 50 MiB of text and a newline. */
export const LONG_LINE_BYTES = 50 * MiB;

/** Bytes of binary output (every byte value but the newline) written to each stream by the flood. */
export const FLOOD_CHUNK_BYTES = 255 * 256;
export const FLOOD_BYTES = FLOOD_CHUNK_BYTES * 512;

/** The helpers every program starts with. */
const PRELUDE = [
  'import ctypes, errno, json, os, resource, shutil, signal, sys, time',
  'def name(e): return errno.errorcode.get(e, str(e))',
  'def write_all(fd, data):',
  '    view = memoryview(data)',
  '    while view: view = view[os.write(fd, view):]',
  'def report(case, **kw): write_all(1, (json.dumps({"case": case, **kw}) + "\\n").encode())',
  // Runs fn in a child process and returns its answer: whatever fn takes (processes, threads,
  // descriptors, memory) goes with the child.
  'def in_child(fn, *args):',
  '    r, w = os.pipe()',
  '    pid = os.fork()',
  '    if pid == 0:',
  '        os.close(r)',
  '        try: out = fn(*args)',
  '        except BaseException as e: out = {"broken": type(e).__name__ + ": " + str(e)}',
  '        write_all(w, json.dumps(out).encode()); os._exit(0)',
  '    os.close(w)',
  '    data = b""',
  '    while True:',
  '        chunk = os.read(r, 65536)',
  '        if not chunk: break',
  '        data += chunk',
  '    os.close(r)',
  '    _, status = os.waitpid(pid, 0)',
  '    try: return json.loads(data)',
  '    except ValueError: return {"broken": "no answer (wait status %d)" % status}',
];

/**
 * Start processes until that fails, each a small program of its own (posix_spawn: a clone and an
 * exec; a forked copy of Python costs gVisor's Sentry megabytes, and 128 of them reach a 512 MiB
 * memory limit before the pids limit), then thread until pthread_create fails; file descriptors until open fails;
 * then every writable mount filled until a write fails (a message-queue mount: queues created
 * until that fails), and, given `inodeCap`, the workspace with empty files until creating one
 * fails (at most `inodeCap`); then a 50 MiB line on each stream. Ends by itself.
 */
export function containedProgram(inodeCap: number | undefined): string {
  return [
    ...PRELUDE,
    'def fork_bomb():',
    '    kids, err = [], None',
    '    while len(kids) < 100000:',
    '        try: kids.append(os.posix_spawn("/bin/sleep", ["sleep", "3600"], {}))',
    '        except OSError as e: err = name(e.errno); break',
    '    visible = sum(1 for p in os.listdir("/proc") if p.isdigit())',
    '    for p in kids: os.kill(p, signal.SIGKILL)',
    '    for p in kids: os.waitpid(p, 0)',
    '    return {"error": err, "spawned": len(kids), "visible": visible}',
    'def thread_bomb():',
    '    libc = ctypes.CDLL(None, use_errno=True)',
    '    start = ctypes.cast(libc.pause, ctypes.c_void_p)',
    '    n, err = 0, None',
    '    while n < 100000:',
    '        tid = ctypes.c_ulong()',
    '        rc = libc.pthread_create(ctypes.byref(tid), None, start, None)',
    '        if rc: err = name(rc); break',
    '        n += 1',
    '    return {"error": err, "threads": n, "tasks": len(os.listdir("/proc/self/task"))}',
    'def fd_bomb():',
    '    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]',
    '    fds, err = [], None',
    '    while len(fds) < 1 << 20:',
    '        try: fds.append(os.open("/dev/null", os.O_RDONLY))',
    '        except OSError as e: err = name(e.errno); break',
    '    return {"error": err, "opened": len(fds), "limit": limit}',
    // Every mount the program may create a file in (or, for a file mounted alone, open for writing).
    'def writable_mounts():',
    '    found = {}',
    '    for line in open("/proc/self/mountinfo"):',
    '        fields = line.split()',
    '        point = fields[4].replace("\\\\040", " ")',
    '        fstype = fields[fields.index("-") + 1]',
    '        if point.startswith(("/proc", "/sys")): continue',
    '        if os.path.isdir(point):',
    '            probe = os.path.join(point, ".sandpit-probe")',
    '            try: os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))',
    '            except OSError: continue',
    '            os.unlink(probe)',
    '        elif not os.access(point, os.W_OK): continue',
    '        found[point] = fstype',
    '    return found',
    'def mount_of(path, mounts):',
    '    return max((m for m in mounts if path == m or path.startswith(m.rstrip("/") + "/")), key=len, default=None)',
    'def fill(point, fstype):',
    '    st = os.statvfs(point)',
    '    written, err, files = 0, None, []',
    '    chunk = b"\\xa5" * (1 << 20)',
    '    try:',
    '        if fstype == "mqueue":',
    '            while len(files) < 1 << 20:',
    '                f = os.path.join(point, "sandpit-fill-%d" % len(files))',
    '                os.close(os.open(f, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)); files.append(f)',
    '        elif os.path.isdir(point):',
    '            while written < 1 << 32:',
    '                f = os.path.join(point, ".sandpit-fill-%d" % len(files)); files.append(f)',
    '                with open(f, "wb", buffering=0) as out:',
    '                    for _ in range(8): written += out.write(chunk)',
    '        else:',
    '            with open(point, "ab", buffering=0) as out:',
    '                while written < 1 << 32: written += out.write(chunk)',
    '    except OSError as e: err = name(e.errno)',
    '    for f in files:',
    '        try: os.unlink(f)',
    '        except OSError: pass',
    '    if not os.path.isdir(point): open(point, "r+b").truncate(0)',
    '    return {"error": err, "written": written, "created": len(files), "size": st.f_blocks * st.f_frsize}',
    'def inode_fill(point, cap):',
    '    d = os.path.join(point, ".sandpit-inodes"); os.mkdir(d)',
    '    st = os.statvfs(point)',
    '    n, err = 0, None',
    '    while n < cap:',
    '        try: os.close(os.open(os.path.join(d, str(n)), os.O_CREAT | os.O_WRONLY, 0o600))',
    '        except OSError as e: err = name(e.errno); break',
    '        n += 1',
    '    shutil.rmtree(d, ignore_errors=True)',
    '    return {"error": err, "files": n, "inodes": st.f_files}',
    'def timed(fn, *args):',
    '    t0 = time.time(); out = in_child(fn, *args); out["seconds"] = round(time.time() - t0, 2); return out',
    'report("fork", **timed(fork_bomb))',
    'report("thread", **timed(thread_bomb))',
    'report("fd", **timed(fd_bomb))',
    'mounts = in_child(writable_mounts)',
    'report("writable", mounts=mounts, home=mount_of(os.environ.get("HOME", "/"), mounts), cwd=mount_of(os.getcwd(), mounts))',
    'for point in sorted(m for m in mounts if m != "broken"):',
    '    report("fill", path=point, fstype=mounts[point], **timed(fill, point, mounts[point]))',
    ...(inodeCap ? [`report("inode", **timed(inode_fill, os.getcwd(), ${inodeCap}))`] : []),
    // Written a MiB at a time: the line is long on the stream, not in the program's memory.
    ...['1, b"x"', '2, b"e"'].flatMap((fd) => [
      `for _ in range(${LONG_LINE_BYTES / MiB}): write_all(${fd} * ${MiB})`,
      `write_all(${fd.split(',')[0]}, b"\\n")`,
    ]),
  ].join('\n');
}

/** Pages touched, 16 MiB at a time, until the memory limit kills the program. */
export const MEMORY_BOMB = ['hog = []', 'while True: hog.append(b"\\x01" * (16 << 20))'].join('\n');

/**
 * Empty files created in the workspace until creating one fails, reporting the count every 5,000:
 * where its tmpfs has no inode count of its own, until the memory limit kills the program.
 */
export const INODE_BOMB = [
  'import errno, os',
  'os.mkdir(".sandpit-inodes"); n = 0',
  'try:',
  '    while True:',
  '        os.close(os.open(".sandpit-inodes/%d" % n, os.O_CREAT | os.O_WRONLY, 0o600)); n += 1',
  '        if n % 5000 == 0: print(\'{"case": "inodes", "files": %d}\' % n, flush=True)',
  'except OSError as e:',
  '    print(\'{"case": "inodes", "files": %d, "error": "%s"}\' % (n, errno.errorcode[e.errno]), flush=True)',
].join('\n');

/** Python that ignores the signals a polite stop sends and sleeps forever (`-c` text). */
const STUBBORN = [
  'import signal, time',
  'for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT): signal.signal(s, signal.SIG_IGN)',
  'while True: time.sleep(3600)',
].join('\n');

/** What the deadline program starts, each with `<marker>-<role>` in its argv. */
export const STRAGGLERS = ['stubborn', 'daemon', 'setsid'] as const;

/**
 * Starts a child that ignores SIGTERM (in the program's own process group), a double-forked
 * daemon and a setsid child (each in a session of its own, as a daemon would), each sleeping
 * forever with `<marker>-<role>` in its argv, and waits until all three run (else exits 3). Then
 * floods both streams with binary output without a newline (FLOOD_BYTES each), and spins until
 * the deadline ends it. So an exact count of the flood also says that all three were running.
 */
export function stragglersProgram(marker: string): string {
  return [
    ...PRELUDE,
    `M = ${JSON.stringify(marker)}`,
    `STUBBORN = ${JSON.stringify(STUBBORN)}`,
    'def spawn(role, detach, twice):',
    '    if os.fork(): return',
    '    if detach: os.setsid()',
    '    if twice and os.fork(): os._exit(0)',
    '    os.execv(sys.executable, [sys.executable, "-c", STUBBORN, M + "-" + role])',
    'spawn("stubborn", False, False)',
    'spawn("daemon", True, True)',
    'spawn("setsid", True, False)',
    'def running():',
    '    found = set()',
    '    for p in os.listdir("/proc"):',
    '        try: args = open("/proc/%s/cmdline" % p, "rb").read().split(b"\\0")',
    '        except OSError: continue',
    '        found.update(a for a in args if a.startswith(M.encode() + b"-"))',
    '    return found',
    't0 = time.time()',
    `while len(running()) < ${STRAGGLERS.length}:`,
    '    if time.time() - t0 > 10: sys.exit(3)',
    '    time.sleep(0.02)',
    'chunk = bytes(b for b in range(256) if b != 10) * 256',
    `assert len(chunk) == ${FLOOD_CHUNK_BYTES}`,
    `for _ in range(${FLOOD_BYTES / FLOOD_CHUNK_BYTES}):`,
    '    write_all(1, chunk); write_all(2, chunk)',
    'while True: pass',
  ].join('\n');
}

/** Every `{"case": …}` line of a program's stdout, by case (a case that reports again is a list). */
export function reportsOf(stdout: string): Map<string, Record<string, unknown>[]> {
  const out = new Map<string, Record<string, unknown>[]>();
  for (const line of stdout.split('\n')) {
    // Where both streams are one (a Kubernetes run's pod log), a piece of the other stream may
    // come first on the line: the report is from its start on.
    const at = line.indexOf('{"case": ');
    if (at < 0) continue;
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(line.slice(at)) as Record<string, unknown>;
    } catch {
      continue; // a line cut by the output window
    }
    const list = out.get(String(parsed.case)) ?? [];
    list.push(parsed);
    out.set(String(parsed.case), list);
  }
  return out;
}
