/**
 * Leaks (issue 21), looked for from inside a sandbox:
 *   - the secrets the gateway and the operator hold (a canary token in their env and config, the
 *     cluster's credentials), searched for everywhere the program can read: environments and
 *     command lines of every process it sees, every readable file (within a time bound it must
 *     not run out of), /run/secrets and /var/run/secrets; and any service-account token;
 *   - the state an earlier run or session left in the same pool: files in every writable path,
 *     a double-forked daemon and a setsid child, variables, /dev/shm and the tmpfs.
 * The programs never carry what they look for in the clear (it is XORed), so that their own code,
 * command line or workspace copy cannot be what they find.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { configLabel, type HostileConfig, type Ran, type Untrusted } from './untrusted.js';

/** What a program must not find, hidden: hex of each byte XOR 0x5a. */
const hide = (s: string): string => Buffer.from(Buffer.from(s).map((b) => b ^ 0x5a)).toString('hex');

const PRELUDE = [
  'import json, os, stat, sys, time',
  'def unhide(h): return bytes(b ^ 0x5a for b in bytes.fromhex(h))',
];

/** The start of every JSON Web Token (a service-account token is one): base64 of `{"alg":`. */
const JWT_START = 'eyJhbGciOi';

/** Files larger than this are counted, not read (no secret file is this large). */
const LARGEST_READ = 4 * 1024 * 1024;

/** Searches everything readable for each needle; prints one JSON line. */
function searchProgram(needles: Record<string, string>, budgetSeconds: number): string {
  const hidden = Object.entries(needles).map(([label, value]) => [label, hide(value)]);
  return [
    ...PRELUDE,
    `NEEDLES = [(l, unhide(h)) for l, h in ${JSON.stringify(hidden)}]`,
    `deadline = time.monotonic() + ${budgetSeconds}`,
    'found, scanned, large, unreadable, complete = [], 0, 0, 0, True',
    'def look(where, data):',
    '    for label, n in NEEDLES:',
    '        if n in data: found.append([label, where])',
    'look("its own environment", b"\\0".join(f"{k}={v}".encode() for k, v in os.environ.items()))',
    'for pid in [p for p in os.listdir("/proc") if p.isdigit()]:',
    '    for f in ("environ", "cmdline"):',
    '        try: look(f"/proc/{pid}/{f}", open(f"/proc/{pid}/{f}", "rb").read())',
    '        except OSError: pass',
    'secret_mounts = []',
    'for d in ("/run/secrets", "/var/run/secrets"):',
    '    for root, dirs, files in os.walk(d): secret_mounts += [os.path.join(root, f) for f in files + dirs]',
    'def walk(top, skip=()):',
    '    global scanned, large, unreadable, complete',
    '    for root, dirs, files in os.walk(top):',
    '        if root == top: dirs[:] = [d for d in dirs if d not in skip]',
    '        if time.monotonic() > deadline: complete = False; return',
    '        for f in files:',
    '            p = os.path.join(root, f)',
    '            try:',
    '                st = os.lstat(p)',
    '                if not stat.S_ISREG(st.st_mode): continue',
    `                if st.st_size > ${LARGEST_READ}: large += 1; continue`,
    '                with open(p, "rb") as fh: data = fh.read()',
    '            except OSError: unreadable += 1; continue',
    '            scanned += 1',
    '            look(p, data)',
    // /proc and /sys are the kernel's (the processes were read above); of /dev only the tmpfs.
    'walk("/", ("proc", "sys", "dev"))',
    'walk("/dev/shm")',
    'print(json.dumps({"found": found, "secretMounts": secret_mounts, "scanned": scanned, "large": large, "unreadable": unreadable, "complete": complete}))',
  ].join('\n');
}

interface Search {
  found: [string, string][];
  secretMounts: string[];
  scanned: number;
  large: number;
  unreadable: number;
  complete: boolean;
}

/** The writable directories a program finds: the usual ones, and every rw mount it can write to. */
const WRITABLE = [
  'def writable():',
  '    ds = {"/tmp", "/var/tmp", "/dev/shm", os.getcwd(), os.environ.get("HOME", "/tmp"), "/workspace"}',
  '    for line in open("/proc/self/mounts"):',
  '        parts = line.split()',
  '        if len(parts) > 3 and "rw" in parts[3].split(",") and not parts[1].startswith(("/proc", "/sys")): ds.add(parts[1])',
  '    return sorted(d for d in ds if os.path.isdir(d) and os.access(d, os.W_OK))',
];

/** Run 1: marks every writable directory, starts processes that try to stay, sets variables. */
function leaveProgram(marker: string): string {
  return [
    ...PRELUDE,
    `M = unhide(${JSON.stringify(hide(marker))}).decode()`,
    ...WRITABLE,
    'wrote = []',
    'for d in writable():',
    '    try:',
    '        with open(os.path.join(d, M), "w") as f: f.write(M)',
    '        wrote.append(d)',
    '    except OSError: pass',
    // A shell start-up file in HOME, and the variable in its own environment for its children.
    'home = os.environ.get("HOME", "/tmp")',
    'try:',
    '    with open(os.path.join(home, ".profile"), "a") as f: f.write(f"export {M}=1\\n")',
    'except OSError: pass',
    'os.environ[M] = M',
    // A double-forked daemon and a setsid child, each with the marker in its command line and env.
    'def stay():',
    '    os.execvp("python3", ["python3", "-c", "import time; time.sleep(600)", M])',
    'if os.fork() == 0:',
    '    os.setsid()',
    '    if os.fork() == 0: stay()',
    '    os._exit(0)',
    'os.wait()',
    'child = os.fork()',
    'if child == 0:',
    '    os.setsid(); stay()',
    'def cmdline(p):',
    '    try: return open(f"/proc/{p}/cmdline", "rb").read()',
    '    except OSError: return b""',
    // Both have exec'd once their command lines show the marker (within 5 s on a loaded machine).
    'until = time.monotonic() + 5',
    'while True:',
    '    seen = [p for p in os.listdir("/proc") if p.isdigit() and M.encode() in cmdline(p)]',
    '    if len(seen) >= 2 or time.monotonic() > until: break',
    '    time.sleep(0.05)',
    'print(json.dumps({"wrote": wrote, "processes": len(seen)}))',
  ].join('\n');
}

/** Run 2: looks for anything of run 1 in every writable directory, the processes and its variables. */
function findProgram(marker: string): string {
  return [
    ...PRELUDE,
    `M = unhide(${JSON.stringify(hide(marker))})`,
    ...WRITABLE,
    'files, looked = [], writable()',
    'for top in looked:',
    '    for root, dirs, fs in os.walk(top):',
    '        for f in fs + dirs:',
    '            p = os.path.join(root, f)',
    '            if M in f.encode(): files.append(p); continue',
    '            try:',
    '                if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) < 1 << 20 and M in open(p, "rb").read(): files.append(p)',
    '            except OSError: pass',
    'processes = []',
    'for p in [p for p in os.listdir("/proc") if p.isdigit()]:',
    '    for f in ("cmdline", "environ"):',
    '        try:',
    '            if M in open(f"/proc/{p}/{f}", "rb").read(): processes.append(f"{p}/{f}")',
    '        except OSError: pass',
    'env = [k for k, v in os.environ.items() if M in k.encode() or M in v.encode()]',
    'print(json.dumps({"files": files, "processes": processes, "env": env, "looked": looked}))',
  ].join('\n');
}

/** The last JSON line a program printed, or a failure that says what came instead. */
function report<T>(r: Ran): T {
  const line = r.stdout
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('{'));
  assert.ok(
    line,
    `no report: ${r.phase} ${r.reason ?? ''} ${r.stderr.slice(0, 2000)} ${r.stdout.slice(-500)}`,
  );
  return JSON.parse(line) as T;
}

/** Time the search may take (it must finish within it: a search cut short proves nothing). */
const SEARCH_SECONDS = 20;

export function leakCases(config: HostileConfig, make: () => Promise<Untrusted>): void {
  describe(`hostile: leaks (${configLabel(config)})`, () => {
    let target: Untrusted;
    let search: Search;
    const marker = `sandpit-marker-${randomBytes(8).toString('hex')}`;
    let left: { wrote: string[]; processes: number };
    let found: { files: string[]; processes: string[]; env: string[]; looked: string[] };
    before(async () => {
      target = await make();
      const needles = { ...target.secrets, 'a JSON Web Token (a service-account token)': JWT_START };
      search = report(
        await target.run({
          code: searchProgram(needles, SEARCH_SECONDS),
          timeoutSeconds: SEARCH_SECONDS + 10,
        }),
      );
      // Two runs one after the other from the same pool (warm configurations are asserted warm).
      left = report(await target.run({ code: leaveProgram(marker), timeoutSeconds: 20 }));
      found = report(await target.run({ code: findProgram(marker), timeoutSeconds: 20 }));
    });
    after(() => target?.close());

    test('the search read every file it could, within its time', () => {
      assert.equal(search.complete, true, `the search ran out of its ${SEARCH_SECONDS} s`);
      assert.ok(search.scanned > 100, `only ${search.scanned} files read: ${JSON.stringify(search)}`);
    });

    test('no secret of the gateway or the operator (a canary token in their env and config; the cluster’s tokens) is anywhere it can read', () => {
      const secrets = search.found.filter(([label]) => label in target.secrets);
      assert.deepEqual(secrets, [], `SECRETS LEAKED into the sandbox: ${JSON.stringify(secrets)}`);
    });

    test('no service-account token: nothing under /run/secrets or /var/run/secrets, nothing JWT-shaped (PSS: automountServiceAccountToken false)', () => {
      assert.deepEqual(search.secretMounts, []);
      assert.deepEqual(
        search.found.filter(([label]) => !(label in target.secrets)),
        [],
      );
    });

    test('the earlier run left its marks: a file in /tmp, the workspace and /dev/shm, and two processes', () => {
      for (const dir of ['/tmp', '/workspace', '/dev/shm'])
        assert.ok(left.wrote.includes(dir), `it wrote no mark in ${dir}: ${JSON.stringify(left)}`);
      assert.equal(left.processes, 2, `the daemon and the setsid child ran: ${JSON.stringify(left)}`);
    });

    test('the next run in the same pool finds no file of it (/tmp, the workspace, /dev/shm, $HOME, every writable mount)', () => {
      assert.ok(found.looked.includes('/tmp') && found.looked.includes('/workspace'), JSON.stringify(found));
      assert.deepEqual(found.files, []);
    });

    test('the next run finds no process of it (a double-forked daemon, a setsid child)', () => {
      assert.deepEqual(found.processes, []);
    });

    test('the next run has none of its variables (its environment, its ~/.profile)', () => {
      assert.deepEqual(found.env, []);
    });
  });
}
