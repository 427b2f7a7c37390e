/**
 * Egress by allowlist from inside real sandboxes, for every backend whose sandboxes reach the
 * proxy through a socket of their own (Docker, oci): sandboxes with only lo and no resolver, whose
 * one way out is the egress proxy in this process, reached through their gate. Every upstream is a
 * server this test starts on 127.0.0.1; test names (`*.sandpit.test`) reach it through a test
 * resolver, loopback is named by an explicit CIDR entry of this test's ceiling alone, and the
 * proxy's dialer fails the test on any address off loopback. No packet leaves the machine.
 * The images need runner protocol 4 with egress ('p') and the node image npm: images/build.sh
 * (SANDPIT_TEST_IMAGE_REPO names a copy of them tagged apart, see test/support/docker.ts).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { EgressAuditRecord } from '../../../src/api/audit.js';
import { toEntry } from '../../../src/api/egress.js';
import { RunRequestSchema, type RunRequestInput, type RunResult } from '../../../src/api/run.js';
import type { SessionBackend } from '../../../src/backends/sessions.js';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { ownAddresses } from '../../../src/cmd/egress.js';
import type { BackendWiring, Context } from '../../../src/cmd/wiring.js';
import { loadConfig } from '../../../src/config/load.js';
import { buildFloor } from '../../../src/egress/floor.js';
import { createEgressProxy } from '../../../src/egress/proxy.js';
import { createSocketGates, type SocketGates } from '../../../src/egress/socket-gates.js';
import { DEFAULT_EGRESS_LIMITS } from '../../../src/egress/tenant.js';
import type { Dialer, Resolver } from '../../../src/egress/upstream.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { evaluate } from '../../../src/policy/evaluate.js';
import { createPolicy, type Policy } from '../../../src/policy/policy.js';
import { readAuditFile } from '../../support/audit.js';
import { runId, testTemplates } from '../../support/docker.js';
import { echoServer, loopbackDialer, testResolver } from '../../support/egress.js';
import {
  buildNpmPackage,
  buildWheel,
  npmRegistry,
  simpleIndex,
  type PackageServer,
} from '../../support/packages.js';
import { runExec, sessionId, sessionSpec } from '../../support/sessions.js';

export const WHEEL = buildWheel('sandpitegress', '0.1.0', 'hello through the proxy');

/** A backend whose sandboxes reach the proxy through the gates it is given. */
export type GatedBackend = SandboxBackend & { readonly sessions: SessionBackend };

/** The test names every proxy of these tests resolves, all to loopback but one (rebinding). */
const NAMES = (): Record<string, string[]> => ({
  'pypi.sandpit.test': ['127.0.0.1'],
  'registry.sandpit.test': ['127.0.0.1'],
  'echo.sandpit.test': ['127.0.0.1'],
  'rebind.sandpit.test': ['10.0.0.1'],
});

/**
 * What the cases share: the loopback servers, the gates' root and proxy (its audit records in
 * `audit`), the policy whose ceiling names them, and the backend under test. Filled in by the
 * `before` hook egressHarness registers.
 */
export interface EgressHarness {
  pypi: PackageServer;
  registry: PackageServer;
  echo: Awaited<ReturnType<typeof echoServer>>;
  /** The gates' root: one directory per egress sandbox lives here while the sandbox does. */
  root: string;
  gates: SocketGates;
  policy: Policy;
  backend: GatedBackend;
  audit: EgressAuditRecord[];
  /** Every address the proxies dialed (each must be loopback). */
  dialed: string[];
  /** The backend's name in audit records. */
  name: 'docker' | 'oci';
  /** A proxy of the same shape with its own records (a second gateway's). */
  proxyWith(
    audit: (r: EgressAuditRecord) => void,
    names?: Record<string, string[]>,
  ): ReturnType<typeof createEgressProxy>;
}

/**
 * Starts the servers and the gates before the file's tests and the backend `make` returns over
 * them; closes everything after, and asserts that the proxy dialed only loopback.
 */
export function egressHarness(
  name: EgressHarness['name'],
  make: (gates: SocketGates) => Promise<GatedBackend>,
): EgressHarness {
  const h = { audit: [], dialed: [], name } as unknown as EgressHarness;
  h.proxyWith = (audit, names = NAMES()) =>
    createEgressProxy({
      floor: buildFloor({ ownAddresses: ownAddresses() }),
      limits: DEFAULT_EGRESS_LIMITS,
      backend: name,
      audit,
      resolve: testResolver(names),
      dial: loopbackDialer(h.dialed),
    });
  before(async () => {
    h.pypi = await simpleIndex(WHEEL);
    h.registry = await npmRegistry(
      await buildNpmPackage('sandpit-egress-npm', '1.0.0', 'hello from the registry'),
      'registry.sandpit.test',
    );
    h.echo = await echoServer();
    h.root = mkdtempSync(join(tmpdir(), 'sandpit-egress-'));
    h.gates = createSocketGates({ root: h.root, proxy: h.proxyWith((r) => h.audit.push(r)) });
    h.policy = createPolicy({
      templates: testTemplates(),
      ceilings: { timeoutSeconds: 120 },
      egress: {
        disabled: false,
        ceiling: [
          `pypi.sandpit.test:${h.pypi.port}`,
          `registry.sandpit.test:${h.registry.port}`,
          `echo.sandpit.test:${h.echo.port}`,
          `rebind.sandpit.test:${h.echo.port}`,
          // Loopback is in the SSRF floor; this test's ceiling alone names it, for its servers.
          '127.0.0.1/32',
        ].map(toEntry),
      },
    });
    h.backend = await make(h.gates);
  });
  after(async () => {
    await h.backend?.close();
    await Promise.all([h.pypi?.close(), h.registry?.close(), h.echo?.close()]);
    if (h.root) rmSync(h.root, { recursive: true, force: true });
    assert.ok(
      h.dialed.every((d) => d.startsWith('127.0.0.1:')),
      `the proxy dialed only loopback: ${h.dialed.join(', ')}`,
    );
  });
  return h;
}

/** Runs `request` to its end on the harness's backend (or `on`), its run id with the result. */
export async function runEgress(
  h: EgressHarness,
  request: RunRequestInput,
  on: SandboxBackend = h.backend,
): Promise<RunResult & { runId: string }> {
  const evaluation = evaluate(RunRequestSchema.parse(request), h.policy);
  assert.ok(evaluation.ok, JSON.stringify(!evaluation.ok && evaluation.violations));
  const id = runId('egress');
  const execution = on.start(evaluation.spec, { runId: id, principal: 'tester' });
  const result = await execution.result;
  await execution.cleanedUp;
  return { ...result, runId: id };
}

export const allow = (...entries: string[]) => ({ egress: 'allowlist' as const, allow: entries });

const pipIndex = (h: EgressHarness) => [
  '--index-url',
  `http://pypi.sandpit.test:${h.pypi.port}/simple/`,
  '--trusted-host',
  'pypi.sandpit.test',
  // One retry: pip names the connection error only when it retries.
  '--retries',
  '1',
  '--timeout',
  '10',
  '--no-cache-dir',
  '--disable-pip-version-check',
];

const egressOf = (h: EgressHarness, id: string) => h.audit.filter((r) => r.runId === id);

/** pip (a run and a session) and npm through the proxy; pip without an allowlist. */
export function packageCases(h: EgressHarness, options: { npm: boolean } = { npm: true }): void {
  describe('pip and npm through the proxy', () => {
    test('pip install of a wheel from a simple index on loopback, with an allowlist: installed and imported', async () => {
      const r = await runEgress(h, {
        template: 'python',
        command: [
          '/bin/sh',
          '-c',
          `pip install ${pipIndex(h).join(' ')} --target /workspace/lib sandpitegress && PYTHONPATH=/workspace/lib python3 -c 'import sandpitegress; print(sandpitegress.hello())'`,
        ],
        network: allow(`pypi.sandpit.test:${h.pypi.port}`, '127.0.0.1/32'),
        timeoutSeconds: 60,
      });
      assert.equal(r.exitCode, 0, `${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, /hello through the proxy/);
      assert.ok(
        h.pypi.seen.includes(`GET pypi.sandpit.test:${h.pypi.port} /simple/sandpitegress/`),
        h.pypi.seen.join('\n'),
      );
      assert.ok(h.pypi.seen.includes(`GET pypi.sandpit.test:${h.pypi.port} /packages/${WHEEL.file}`));
      const records = egressOf(h, r.runId);
      assert.ok(records.length >= 2, JSON.stringify(records));
      for (const rec of records) {
        assert.equal(rec.decision, 'allowed');
        assert.equal(rec.method, 'GET');
        assert.equal(rec.host, 'pypi.sandpit.test');
        assert.equal(rec.address, '127.0.0.1');
        assert.equal(rec.principal, 'tester');
        assert.equal(rec.backend, h.name);
      }
    });

    test('the same pip install without the allowlist fails fast, saying the sandbox has no network', async () => {
      const before = h.pypi.seen.length;
      const t0 = performance.now();
      const r = await runEgress(h, {
        template: 'python',
        command: ['pip', 'install', ...pipIndex(h), '--target', '/workspace/lib', 'sandpitegress'],
        timeoutSeconds: 60,
      });
      assert.notEqual(r.exitCode, 0);
      assert.ok(performance.now() - t0 < 20_000, 'fails within 20 s');
      assert.match(
        r.stderr,
        /Temporary failure in name resolution|Network is unreachable|No matching distribution/,
      );
      assert.equal(r.hint, 'this sandbox has no network (egress: none)');
      assert.equal(h.pypi.seen.length, before, 'nothing reached the index');
      assert.deepEqual(egressOf(h, r.runId), []);
    });

    test('a plain pip install in a session (no --target), imported by the next exec', async () => {
      const spec = sessionSpec(
        { template: 'python', network: allow(`pypi.sandpit.test:${h.pypi.port}`, '127.0.0.1/32') },
        h.policy,
      );
      const sandbox = await h.backend.sessions.createSession(spec, {
        sessionId: sessionId('egress'),
        principal: 'tester',
      });
      try {
        const install = await runExec(
          sandbox,
          spec,
          { command: ['pip', 'install', ...pipIndex(h), 'sandpitegress'], timeoutSeconds: 60 },
          { policy: h.policy },
        );
        assert.equal(install.outcome.exitCode, 0, `${install.stdout.text}\n${install.stderr.text}`);
        const use = await runExec(
          sandbox,
          spec,
          { command: ['python3', '-c', 'import sandpitegress; print(sandpitegress.hello())'] },
          { policy: h.policy },
        );
        assert.equal(use.outcome.exitCode, 0, use.stderr.text);
        assert.equal(use.stdout.text, 'hello through the proxy\n');
        assert.ok(h.audit.some((rec) => rec.sessionId === sandbox.sessionId && rec.decision === 'allowed'));
      } finally {
        await sandbox.close('Deleted');
      }
    });

    if (options.npm)
      test('npm install from a registry stand-in on loopback (a packument and a tarball)', async () => {
        const r = await runEgress(h, {
          template: 'node',
          command: [
            '/bin/sh',
            '-c',
            `npm install --registry http://registry.sandpit.test:${h.registry.port}/ --no-audit --no-fund --no-update-notifier sandpit-egress-npm && node -e "console.log(require('sandpit-egress-npm').hello())"`,
          ],
          network: allow(`registry.sandpit.test:${h.registry.port}`, '127.0.0.1/32'),
          timeoutSeconds: 60,
        });
        assert.equal(r.exitCode, 0, `${r.stdout}\n${r.stderr}`);
        assert.match(r.stdout, /hello from the registry/);
        assert.ok(
          h.registry.seen.some((s) => s.endsWith('/sandpit-egress-npm')),
          h.registry.seen.join('\n'),
        );
        assert.ok(egressOf(h, r.runId).every((rec) => rec.decision === 'allowed'));
      });
  });
}

/** Probes from inside the sandbox, as JSON: what the network looks like and what each attempt got. */
const PROBES = String.raw`
import http.client, json, os, socket, urllib.request
echo = int(os.environ['ECHO_PORT']); index = int(os.environ['INDEX_PORT'])
out = {}
def routes(path):
    with open(path) as f:
        return [l.split() for l in f.read().splitlines()]
out['route'] = routes('/proc/net/route')[1:]
out['ipv6_route_devices'] = sorted({l[-1] for l in routes('/proc/net/ipv6_route')})
def lo_packets():
    for l in open('/proc/net/dev'):
        name, _, rest = l.partition(':')
        if name.strip() == 'lo':
            f = rest.split()
            return int(f[1]) + int(f[9])
before = lo_packets()
try:
    socket.getaddrinfo('pypi.sandpit.test', 80); out['lookup'] = 'resolved'
except OSError as e:
    out['lookup'] = str(e)
out['lookup_packets'] = lo_packets() - before
def direct(host):
    s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET); s.settimeout(3)
    try:
        s.connect((host, echo)); return 'connected'
    except OSError as e:
        return e.strerror
    finally:
        s.close()
out['direct'] = [direct('127.0.0.1'), direct('::1')]
def tunnel(host, port):
    c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10); c.set_tunnel(host, port)
    try:
        c.connect(); c.sock.sendall(b'ping'); return 'open: ' + c.sock.recv(4).decode()
    except OSError as e:
        return str(e)
    finally:
        c.close()
def raw(request):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=10); s.sendall(request.encode())
    data = b''
    while True:
        chunk = s.recv(4096)
        if not chunk: break
        data += chunk
    s.close(); return data.decode(errors='replace').split('\r\n')[0]
out['allowed'] = tunnel('echo.sandpit.test', echo)
out['not_allowed'] = tunnel('evil.sandpit.test', 443)
out['other_port'] = tunnel('echo.sandpit.test', 22)
out['rebinding'] = tunnel('rebind.sandpit.test', echo)
out['v4_literal'] = tunnel('192.0.2.77', 443)
# Python 3.11's set_tunnel leaves IPv6 unbracketed (a malformed CONNECT): this one is written out.
out['v6_literal'] = raw('CONNECT [2001:db8::77]:443 HTTP/1.1\r\nHost: [2001:db8::77]:443\r\n\r\n')
out['doh'] = tunnel('1.1.1.1', 443)
out['host_mismatch'] = raw(f'CONNECT echo.sandpit.test:{echo} HTTP/1.1\r\nHost: evil.sandpit.test:{echo}\r\n\r\n')
out['other_host_get'] = raw('GET http://evil.sandpit.test/ HTTP/1.1\r\nHost: evil.sandpit.test\r\nConnection: close\r\n\r\n')
direct_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    direct_opener.open(f'http://pypi.sandpit.test:{index}/simple/', timeout=5); out['no_proxy_vars'] = 'reached'
except Exception as e:
    out['no_proxy_vars'] = str(e)
out['env'] = {k: os.environ.get(k) for k in ('HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY')}
print(json.dumps(out))
`;

interface Probes {
  route: string[][];
  ipv6_route_devices: string[];
  lookup: string;
  lookup_packets: number;
  direct: string[];
  allowed: string;
  not_allowed: string;
  other_port: string;
  rebinding: string;
  v4_literal: string;
  v6_literal: string;
  doh: string;
  host_mismatch: string;
  other_host_get: string;
  no_proxy_vars: string;
  env: Record<string, string>;
}

/** The probes, in a run under `runtime`: each denied, nothing sent anywhere else. */
export function probeCases(h: EgressHarness, runtime: 'runc' | 'runsc'): void {
  describe(`probes from inside the sandbox (${runtime}): each denied, nothing sent anywhere else`, () => {
    let probes: Probes;
    let id: string;
    const seenBefore = { pypi: 0 };

    before(async () => {
      seenBefore.pypi = h.pypi.seen.length;
      const r = await runEgress(h, {
        template: 'python',
        code: PROBES,
        env: [
          { name: 'ECHO_PORT', value: String(h.echo.port) },
          { name: 'INDEX_PORT', value: String(h.pypi.port) },
        ],
        network: allow(
          `echo.sandpit.test:${h.echo.port}`,
          `rebind.sandpit.test:${h.echo.port}`,
          '127.0.0.1/32',
        ),
        ...(runtime === 'runsc' ? { runtime: 'runsc' } : {}),
        timeoutSeconds: 60,
      });
      assert.equal(r.exitCode, 0, `${r.stdout}\n${r.stderr}`);
      probes = JSON.parse(r.stdout) as Probes;
      id = r.runId;
    });

    test('no route but loopback, the proxy variables set', () => {
      assert.deepEqual(probes.route, []);
      for (const dev of probes.ipv6_route_devices) assert.equal(dev, 'lo');
      assert.deepEqual(probes.env, {
        HTTP_PROXY: 'http://127.0.0.1:3128',
        HTTPS_PROXY: 'http://127.0.0.1:3128',
        NO_PROXY: 'localhost,127.0.0.1,::1',
      });
    });

    test("127.0.0.1 and ::1 on the host upstream's port reach only the sandbox's own loopback", () => {
      // Nothing listens on the sandbox's own loopback; ::1 may not exist at all (IPv6 off in the sandbox).
      assert.equal(probes.direct[0], 'Connection refused');
      assert.match(
        probes.direct[1]!,
        /^(Connection refused|Cannot assign requested address|Network is unreachable)$/,
      );
    });

    test('a name lookup fails with no resolver, and no packet is sent', () => {
      assert.notEqual(probes.lookup, 'resolved');
      assert.equal(probes.lookup_packets, 0);
    });

    test('CONNECT to an allowed name on its port works', () => {
      assert.equal(probes.allowed, 'open: ping');
    });

    test('CONNECT to a name that is not allowed: 403, and the program sees why', () => {
      assert.match(
        probes.not_allowed,
        /Tunnel connection failed: 403 Forbidden \(sandpit egress: evil\.sandpit\.test is not in this sandbox's allowlist\)/,
      );
    });

    test('CONNECT to an allowed name on another port: 403', () => {
      assert.match(probes.other_port, /403 .*port 22 is not allowed for echo\.sandpit\.test/);
    });

    test('an allowed name that resolves to a private address (rebinding): 403, never dialed', () => {
      assert.match(probes.rebinding, /403 .*10\.0\.0\.1 is in the SSRF floor: private \(RFC 1918\)/);
    });

    test('CONNECT to IPv4 and IPv6 literals the policy does not allow, and DNS over HTTPS to 1.1.1.1: 403', () => {
      assert.match(probes.v4_literal, /403 .*192\.0\.2\.77:443 is not in this sandbox's allowlist/);
      assert.match(
        probes.v6_literal,
        /^HTTP\/1\.1 403 .*\[2001:db8::77\]:443 is not in this sandbox's allowlist/,
      );
      assert.match(probes.doh, /403 .*1\.1\.1\.1:443 is not in this sandbox's allowlist/);
    });

    test('a Host header that disagrees with the CONNECT target: 400', () => {
      assert.match(probes.host_mismatch, /^HTTP\/1\.1 400 .*disagrees with the CONNECT target/);
    });

    test('an absolute-URI GET to another host: 403', () => {
      assert.match(
        probes.other_host_get,
        /^HTTP\/1\.1 403 .*evil\.sandpit\.test is not in this sandbox's allowlist/,
      );
    });

    test('a program that leaves the proxy out reaches nothing', () => {
      assert.notEqual(probes.no_proxy_vars, 'reached');
      assert.equal(h.pypi.seen.length, seenBefore.pypi);
    });

    test('one audit record per connection: the allowed one, and every refusal with its rule', () => {
      // Written as each connection ends: the allowed tunnel's may come after the refusals.
      const records = egressOf(h, id).sort((a, b) =>
        a.decision === b.decision ? 0 : a.decision === 'allowed' ? -1 : 1,
      );
      assert.deepEqual(
        records.map((r) => [r.method, `${r.host}:${r.port}`, r.decision]),
        [
          ['CONNECT', `echo.sandpit.test:${h.echo.port}`, 'allowed'],
          ['CONNECT', 'evil.sandpit.test:443', 'denied'],
          ['CONNECT', 'echo.sandpit.test:22', 'denied'],
          ['CONNECT', `rebind.sandpit.test:${h.echo.port}`, 'denied'],
          ['CONNECT', '192.0.2.77:443', 'denied'],
          ['CONNECT', '2001:db8::77:443', 'denied'],
          ['CONNECT', '1.1.1.1:443', 'denied'],
          ['CONNECT', `echo.sandpit.test:${h.echo.port}`, 'denied'],
          ['GET', 'evil.sandpit.test:80', 'denied'],
        ],
      );
      const [ok] = records;
      assert.equal(ok!.address, '127.0.0.1');
      assert.equal(ok!.bytesOut, 4);
      assert.equal(ok!.bytesIn, 4);
      assert.ok(records.slice(1).every((r) => r.address === undefined && r.bytesOut === 0));
    });
  });
}

/** One allowed and two denied connections of a run: exactly three records, each with its rule. */
export function auditCases(h: EgressHarness): void {
  describe('audit', () => {
    test('a run with one allowed and two denied connections gets exactly three records, each with its decision', async () => {
      const r = await runEgress(h, {
        template: 'python',
        code: String.raw`
import http.client, os
def tunnel(host, port):
    c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10); c.set_tunnel(host, port)
    try:
        c.connect(); c.sock.sendall(b'x'); c.sock.recv(1); print('ok')
    except OSError as e:
        print('refused')
    finally:
        c.close()
tunnel('echo.sandpit.test', int(os.environ['ECHO_PORT']))
tunnel('evil.sandpit.test', 443)
tunnel('echo.sandpit.test', 8443)
`,
        env: [{ name: 'ECHO_PORT', value: String(h.echo.port) }],
        network: allow(`echo.sandpit.test:${h.echo.port}`, '127.0.0.1/32'),
      });
      assert.equal(r.stdout, 'ok\nrefused\nrefused\n', r.stderr);
      // One record per connection, written as it ends (the allowed tunnel's may come last).
      assert.deepEqual(
        egressOf(h, r.runId)
          .map((x) => [x.decision, x.rule])
          .sort(),
        [
          ['allowed', `allow echo.sandpit.test:${h.echo.port}`],
          ['denied', "evil.sandpit.test is not in this sandbox's allowlist"],
          ['denied', `port 8443 is not allowed for echo.sandpit.test (allowed: ${h.echo.port})`],
        ].sort(),
      );
    });
  });
}

/** A tunnel to the echo server through the proxy, from inside: `open: <word>`, or the error. */
const tunnelTo = (word: string, host = 'echo.sandpit.test') => String.raw`
import http.client, os
c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10); c.set_tunnel('${host}', int(os.environ['ECHO_PORT']))
try:
    c.connect(); c.sock.sendall(b'${word}'); print('open: ' + c.sock.recv(${word.length}).decode())
except OSError as e:
    print(e)
`;

/**
 * A session under `runtime` with an allowlist: its execs get out through the session's gate, a
 * name outside it gets 403, the records carry the session, and its gate goes when it closes.
 */
export function sessionGateCases(h: EgressHarness, runtime: 'runc' | 'runsc'): void {
  describe(`a session with an allowlist (${runtime})`, () => {
    test("execs get out through the session's gate, and only to what it allows; the gate goes with the session", async () => {
      const before = readdirSync(h.root).sort();
      const spec = sessionSpec(
        {
          template: 'python',
          network: allow(`echo.sandpit.test:${h.echo.port}`, '127.0.0.1/32'),
          ...(runtime === 'runsc' ? { runtime: 'runsc' } : {}),
        },
        h.policy,
      );
      const sandbox = await h.backend.sessions.createSession(spec, {
        sessionId: sessionId(`egress-${runtime}`),
        principal: 'tester',
      });
      try {
        assert.equal(readdirSync(h.root).length, before.length + 1, 'the session has a gate of its own');
        const env = [{ name: 'ECHO_PORT', value: String(h.echo.port) }];
        const allowed = await runExec(
          sandbox,
          spec,
          { command: ['python3', '-c', tunnelTo('session')], env },
          { policy: h.policy },
        );
        assert.equal(allowed.stdout.text, 'open: session\n', allowed.stderr.text);
        const denied = await runExec(
          sandbox,
          spec,
          { command: ['python3', '-c', tunnelTo('nope', 'evil.sandpit.test')], env },
          { policy: h.policy },
        );
        assert.match(
          denied.stdout.text,
          /403 Forbidden .*evil\.sandpit\.test is not in this sandbox's allowlist/,
        );
        await new Promise((r) => setTimeout(r, 100));
        assert.deepEqual(
          h.audit
            .filter((r) => r.sessionId === sandbox.sessionId)
            .map((r) => [r.host, r.decision, r.principal])
            .sort(),
          [
            ['echo.sandpit.test', 'allowed', 'tester'],
            ['evil.sandpit.test', 'denied', 'tester'],
          ],
        );
      } finally {
        await sandbox.close('Deleted');
      }
      assert.deepEqual(readdirSync(h.root).sort(), before, "the session's gate directory is gone");
    });
  });
}

/** A run's gate directory goes with its sandbox. */
export function gateCases(h: EgressHarness): void {
  describe('gates', () => {
    test("a run's gate directory goes with its sandbox", async () => {
      const before = readdirSync(h.root).sort();
      const r = await runEgress(h, {
        template: 'python',
        code: 'import os; print(sorted(os.listdir("/run/sandpit-egress")))',
        network: allow(`echo.sandpit.test:${h.echo.port}`),
      });
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(
        r.stdout,
        "['proxy.sock']\n",
        'the sandbox sees its own socket, and nothing else of the host',
      );
      assert.deepEqual(readdirSync(h.root).sort(), before);
    });

    test('a run without egress has no gate, and nothing at /run/sandpit-egress', async () => {
      const before = readdirSync(h.root).sort();
      const r = await runEgress(h, {
        template: 'python',
        code: 'import os; print(os.listdir("/run/sandpit-egress") if os.path.isdir("/run/sandpit-egress") else "none")',
      });
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /^(\[\]|none)\n$/);
      assert.deepEqual(readdirSync(h.root).sort(), before);
    });
  });
}

/**
 * The gateway as `sandpit serve` and `mcp` wire it from config (DISABLE_NETWORK=false, a ceiling):
 * an allowlist run gets out through the proxy, audited in the file. `wire` composes the backend
 * (with the test's resolver and dialer); `env` adds the backend's own settings.
 */
export function wiredCases(
  h: EgressHarness,
  wire: (
    ctx: Context,
    egress: { resolve: Resolver; dial: Dialer },
  ) => Promise<Pick<BackendWiring, 'service'>>,
  env: Record<string, string> = {},
): void {
  describe('the gateway, wired from config as sandpit serve and mcp are', () => {
    test('DISABLE_NETWORK=false and a ceiling: an allowlist run gets out through the proxy, audited in the file', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'sandpit-egress-wired-'));
      const repo = process.env.SANDPIT_TEST_IMAGE_REPO;
      const image = repo ? `${repo}/python:3.11` : 'sandpit/python:3.11';
      const config = loadConfig({
        env: {
          DISABLE_NETWORK: 'false',
          SANDPIT_SANDBOX_EGRESS_ALLOW: `echo.sandpit.test:${h.echo.port},127.0.0.1/32`,
          SANDBOX_IMAGE_ALLOWLIST: image,
          SANDPIT_SANDBOX_EGRESS_SOCKET_DIR: join(dir, 'egress'),
          SANDPIT_AUDIT_FILE: join(dir, 'audit.jsonl'),
          ...env,
        },
      });
      const { service } = await wire(
        { config, logger: silentLogger() },
        {
          resolve: testResolver({ 'echo.sandpit.test': ['127.0.0.1'] }),
          dial: loopbackDialer(h.dialed),
        },
      );
      try {
        const result = await service.runs.run(
          {
            template: 'python',
            image,
            code: tunnelTo('wired'),
            env: [{ name: 'ECHO_PORT', value: String(h.echo.port) }],
            network: { egress: 'allowlist' },
          },
          LOCAL_PRINCIPAL,
        );
        assert.equal(result.stdout, 'open: wired\n', result.stderr);
        assert.equal(result.backend, h.name);
      } finally {
        await service.shutdown();
      }
      const records = readAuditFile(join(dir, 'audit.jsonl'));
      const egress = records.filter((r) => r.event === 'egress');
      assert.equal(egress.length, 1);
      assert.equal(egress[0]!.decision, 'allowed');
      assert.equal(egress[0]!.backend, h.name);
      const run = records.find((r) => r.event === 'run');
      assert.equal(
        run && 'network' in run ? run.network : undefined,
        `allowlist: echo.sandpit.test:${h.echo.port}, 127.0.0.1/32`,
      );
      assert.deepEqual(readdirSync(join(dir, 'egress')), [], 'no gate is left');
      rmSync(dir, { recursive: true, force: true });
    });
  });
}
