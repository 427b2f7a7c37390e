/**
 * The egress proxy on loopback: a real HTTP server of the proxy's, real upstream servers on
 * 127.0.0.1 and ::1, test names resolved by a test resolver, and a dialer that fails the test on
 * any address off loopback.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request } from 'node:http';
import { createServer, Socket, type AddressInfo, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { EgressAuditRecord } from '../../../src/api/audit.js';
import { toEntry, type EffectiveNetwork } from '../../../src/api/egress.js';
import { buildFloor } from '../../../src/egress/floor.js';
import { createEgressProxy, type EgressProxy, type TenantOf } from '../../../src/egress/proxy.js';
import {
  createTenant,
  DEFAULT_EGRESS_LIMITS,
  type EgressLimits,
  type EgressTenant,
} from '../../../src/egress/tenant.js';
import type { Dialer } from '../../../src/egress/upstream.js';
import { createEgressMetrics } from '../../../src/observability/metrics.js';
import {
  connectThrough,
  echo,
  echoServer,
  loopbackDialer,
  reflectingServer,
  testResolver,
} from '../../support/egress.js';

let upstream: Awaited<ReturnType<typeof echoServer>>;
let upstream6: Awaited<ReturnType<typeof echoServer>>;
let web: Awaited<ReturnType<typeof reflectingServer>>;

before(async () => {
  upstream = await echoServer();
  upstream6 = await echoServer('::1');
  web = await reflectingServer();
});
after(async () => {
  await upstream.close();
  await upstream6.close();
  web.server.closeAllConnections();
  web.server.close();
});

interface Harness {
  port: number;
  proxy: EgressProxy;
  audit: EgressAuditRecord[];
  dialed: string[];
  resolved: string[];
  tenant: EgressTenant;
  metrics: ReturnType<typeof createEgressMetrics>;
  close: () => Promise<void>;
}

async function harness(
  network: EffectiveNetwork,
  options: { limits?: Partial<EgressLimits>; dial?: Dialer; tenantOf?: TenantOf } = {},
): Promise<Harness> {
  const audit: EgressAuditRecord[] = [];
  const dialed: string[] = [];
  const resolved: string[] = [];
  const metrics = createEgressMetrics(new Registry());
  const tenant = createTenant({ runId: 'run-1' }, 'alice', network);
  const proxy = createEgressProxy({
    floor: buildFloor(),
    limits: { ...DEFAULT_EGRESS_LIMITS, ...options.limits },
    backend: 'docker',
    audit: (r) => audit.push(r),
    resolve: testResolver(
      {
        'pypi.sandpit.test': ['127.0.0.1'],
        'v6.sandpit.test': ['::1'],
        'rebind.sandpit.test': ['10.0.0.1', '169.254.169.254'],
        'evil.sandpit.test': ['127.0.0.1'],
      },
      resolved,
    ),
    dial: options.dial ?? loopbackDialer(dialed),
    metrics,
  });
  const listener: Server = createServer({ allowHalfOpen: true }, (s) =>
    proxy.accept(s, options.tenantOf ?? (() => ({ tenant }))),
  );
  listener.listen(0, '127.0.0.1');
  await once(listener, 'listening');
  return {
    port: (listener.address() as AddressInfo).port,
    proxy,
    audit,
    dialed,
    resolved,
    tenant,
    metrics,
    close: async () => {
      proxy.close();
      listener.close();
      await once(listener, 'close');
    },
  };
}

/** The allowlist of a test: the test names on the upstream's port, and loopback named explicitly. */
const loopbackAllow = (...extra: string[]): EffectiveNetwork => ({
  egress: 'allowlist',
  allow: [
    `pypi.sandpit.test:${upstream.port}`,
    `v6.sandpit.test:${upstream6.port}`,
    `rebind.sandpit.test:${upstream.port}`,
    `pypi.sandpit.test:${web.port}`,
    '127.0.0.1/32',
    '::1',
    ...extra,
  ].map(toEntry),
});

const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 20));

describe('CONNECT', () => {
  test('an allowed name: resolved once by the proxy, dialed at the checked address, spliced, audited', async () => {
    const h = await harness(loopbackAllow());
    try {
      const reply = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      assert.equal(reply.status, 200);
      assert.equal(await echo(reply.socket, 'hello through the proxy'), 'hello through the proxy');
      reply.socket.end();
      await once(reply.socket, 'close');
      await settle();
      assert.deepEqual(h.resolved, ['pypi.sandpit.test']);
      assert.deepEqual(h.dialed, [`127.0.0.1:${upstream.port}`]);
      assert.equal(h.audit.length, 1);
      const [r] = h.audit;
      assert.deepEqual(
        { ...r, time: undefined, durationMs: undefined },
        {
          time: undefined,
          durationMs: undefined,
          event: 'egress',
          principal: 'alice',
          backend: 'docker',
          runId: 'run-1',
          method: 'CONNECT',
          host: 'pypi.sandpit.test',
          port: upstream.port,
          address: '127.0.0.1',
          decision: 'allowed',
          rule: `allow pypi.sandpit.test:${upstream.port}`,
          bytesOut: 23,
          bytesIn: 23,
        },
      );
      assert.equal(h.tenant.usage.open, 0);
      assert.equal(h.tenant.usage.bytes, 46);
    } finally {
      await h.close();
    }
  });

  test('a client that shuts its side after sending still reads the whole answer (half-close passed on)', async () => {
    const h = await harness(loopbackAllow());
    try {
      const reply = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      reply.socket.end('sent, then shut');
      let got = '';
      for await (const chunk of reply.socket) got += (chunk as Buffer).toString();
      assert.equal(got, 'sent, then shut');
    } finally {
      await h.close();
    }
  });

  test('IPv6: an allowed name that resolves to ::1, and a literal [::1]', async () => {
    const h = await harness(loopbackAllow());
    try {
      for (const authority of [`v6.sandpit.test:${upstream6.port}`, `[::1]:${upstream6.port}`]) {
        const reply = await connectThrough({ port: h.port }, authority);
        assert.equal(reply.status, 200, authority);
        assert.equal(await echo(reply.socket, 'six'), 'six');
        reply.socket.destroy();
      }
      assert.deepEqual(h.dialed, [`::1:${upstream6.port}`, `::1:${upstream6.port}`]);
    } finally {
      await h.close();
    }
  });

  const refusals: [string, string, Record<string, string> | undefined, number, RegExp][] = [
    [
      'a name that is not allowed',
      'evil.sandpit.test:443',
      undefined,
      403,
      /evil\.sandpit\.test is not in this sandbox's allowlist/,
    ],
    [
      'an allowed name on another port',
      'pypi.sandpit.test:22',
      undefined,
      403,
      /port 22 is not allowed for pypi\.sandpit\.test/,
    ],
    [
      'an IPv4 literal the policy does not allow',
      '1.1.1.1:443',
      undefined,
      403,
      /1\.1\.1\.1:443 is not in this sandbox's allowlist/,
    ],
    [
      'an IPv6 literal the policy does not allow',
      '[2606:4700::1111]:443',
      undefined,
      403,
      /\[2606:4700::1111\]:443 is not in/,
    ],
    ['DNS over HTTPS to an IP literal', '8.8.8.8:443', undefined, 403, /8\.8\.8\.8:443 is not in/],
    [
      'a Host header that disagrees with the target',
      'pypi.sandpit.test:443',
      { host: 'evil.sandpit.test:443' },
      400,
      /Host header \(evil\.sandpit\.test:443\) disagrees/,
    ],
    ['no port', 'pypi.sandpit.test', undefined, 400, /CONNECT needs host:port/],
    ['a numeric name', '2130706433:80', undefined, 400, /CONNECT needs host:port/],
  ];
  for (const [what, authority, headers, status, rule] of refusals) {
    test(`${what}: ${status}, the program sees why, nothing is dialed`, async () => {
      const h = await harness(loopbackAllow());
      try {
        const reply = await connectThrough({ port: h.port }, authority, headers);
        assert.equal(reply.status, status);
        assert.match(reply.reason, /sandpit egress: /);
        assert.match(reply.reason, rule);
        assert.match(reply.body, rule);
        await settle();
        assert.deepEqual(h.dialed, []);
        assert.equal(h.audit.length, 1);
        assert.equal(h.audit[0]!.decision, 'denied');
        assert.match(h.audit[0]!.rule, rule);
      } finally {
        await h.close();
      }
    });
  }

  test('an allowed name that resolves to private and metadata addresses (rebinding): refused, never dialed', async () => {
    const h = await harness(loopbackAllow());
    try {
      const reply = await connectThrough({ port: h.port }, `rebind.sandpit.test:${upstream.port}`);
      assert.equal(reply.status, 403);
      assert.match(reply.reason, /10\.0\.0\.1 is in the SSRF floor: private \(RFC 1918\) 10\.0\.0\.0\/8/);
      await settle();
      assert.deepEqual(h.dialed, []);
      assert.equal(h.audit[0]!.decision, 'denied');
    } finally {
      await h.close();
    }
  });

  test('loopback is refused unless an entry names it: the name alone is not enough', async () => {
    const h = await harness({ egress: 'allowlist', allow: [toEntry(`pypi.sandpit.test:${upstream.port}`)] });
    try {
      const reply = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      assert.equal(reply.status, 403);
      assert.match(reply.reason, /127\.0\.0\.1 is in the SSRF floor: loopback 127\.0\.0\.0\/8/);
      await settle();
      assert.deepEqual(h.dialed, []);
    } finally {
      await h.close();
    }
  });

  test('a connection of no sandbox (an unclaimed pool sandbox): refused, not audited', async () => {
    const h = await harness(loopbackAllow(), {
      tenantOf: () => ({ refused: { status: 403, reason: 'no-egress', rule: 'this sandbox has no egress' } }),
    });
    try {
      const reply = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      assert.equal(reply.status, 403);
      assert.match(reply.reason, /this sandbox has no egress/);
      assert.deepEqual(h.audit, []);
      assert.deepEqual(h.resolved, []);
    } finally {
      await h.close();
    }
  });
});

describe('plain HTTP', () => {
  function get(port: number, url: string, headers: Record<string, string> = {}) {
    return new Promise<{ status: number; message: string; body: string }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: url, headers, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, message: res.statusMessage!, body }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  test('an absolute-URI GET to an allowed name: forwarded with the checked Host, without the proxy headers', async () => {
    const h = await harness(loopbackAllow());
    try {
      const url = `http://pypi.sandpit.test:${web.port}/simple/pkg/?x=1`;
      const res = await get(h.port, url, {
        host: `pypi.sandpit.test:${web.port}`,
        'proxy-authorization': 'Basic c2VjcmV0',
        'x-kept': 'yes',
      });
      assert.equal(res.status, 200);
      const seen = JSON.parse(res.body) as { url: string; headers: Record<string, string> };
      assert.equal(seen.url, '/simple/pkg/?x=1');
      assert.equal(seen.headers.host, `pypi.sandpit.test:${web.port}`);
      assert.equal(seen.headers['x-kept'], 'yes');
      assert.equal(seen.headers['proxy-authorization'], undefined);
      await settle();
      assert.equal(h.audit.length, 1);
      assert.equal(h.audit[0]!.method, 'GET');
      assert.equal(h.audit[0]!.decision, 'allowed');
      assert.ok(h.audit[0]!.bytesIn > res.body.length);
    } finally {
      await h.close();
    }
  });

  for (const [what, url, headers, status, rule] of [
    [
      'another host',
      'http://evil.sandpit.test/',
      { host: 'evil.sandpit.test' },
      403,
      /evil\.sandpit\.test is not in this sandbox's allowlist/,
    ],
    [
      'a Host header that disagrees with the URL',
      `http://pypi.sandpit.test:1/`,
      { host: 'evil.sandpit.test' },
      400,
      /disagrees with the request URL/,
    ],
    ['an origin-form request', '/simple/', {}, 400, /this is an egress proxy/],
    ['an https:// URL', 'https://pypi.sandpit.test/', {}, 400, /use CONNECT for https/],
  ] as const) {
    test(`${what}: ${status}`, async () => {
      const h = await harness(loopbackAllow());
      try {
        const res = await get(h.port, url, headers);
        assert.equal(res.status, status);
        assert.match(res.message, rule);
        assert.match(res.body, rule);
        assert.deepEqual(h.dialed, []);
      } finally {
        await h.close();
      }
    });
  }
});

describe('limits per sandbox', () => {
  test('concurrent connections: one more than the limit gets 429, naming it', async () => {
    const h = await harness(loopbackAllow(), { limits: { maxConnections: 2 } });
    try {
      const a = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      const b = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      const c = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      assert.deepEqual([a.status, b.status, c.status], [200, 200, 429]);
      assert.match(
        c.reason,
        /already has 2 connections open through the egress proxy \(sandbox\.egress\.maxConnections\)/,
      );
      a.socket.destroy();
      await once(a.socket, 'close');
      await settle();
      const d = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      assert.equal(d.status, 200);
      b.socket.destroy();
      d.socket.destroy();
    } finally {
      await h.close();
    }
  });

  test('bytes: the tunnel that passes the limit is cut; the next connection is refused', async () => {
    const h = await harness(loopbackAllow(), { limits: { maxBytes: 1000 } });
    try {
      const a = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      a.socket.on('error', () => {});
      a.socket.write(Buffer.alloc(4000));
      await once(a.socket, 'close');
      await settle();
      assert.equal(h.audit[0]!.error, 'closed: byte limit (sandbox.egress.maxBytes)');
      const b = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      assert.equal(b.status, 429);
      assert.match(b.reason, /has moved its 1000 bytes/);
    } finally {
      await h.close();
    }
  });

  test('idle: a tunnel with no bytes either way is closed', async () => {
    const h = await harness(loopbackAllow(), { limits: { idleTimeoutMs: 150 } });
    try {
      const a = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      const t0 = Date.now();
      await once(a.socket, 'close');
      assert.ok(Date.now() - t0 >= 100);
      await settle();
      assert.equal(h.audit[0]!.error, 'closed: idle timeout (sandbox.egress.idleTimeoutSeconds)');
    } finally {
      await h.close();
    }
  });

  test('connect: an upstream that never answers is given up on (504), naming the limit', async () => {
    const silent: Dialer = () => new Socket();
    const h = await harness(loopbackAllow(), { limits: { connectTimeoutMs: 150 }, dial: silent });
    try {
      const a = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      assert.equal(a.status, 504);
      assert.match(a.reason, /no connection within 0 s \(sandbox\.egress\.connectTimeoutSeconds\)/);
      await settle();
      assert.equal(h.audit[0]!.decision, 'allowed');
      assert.match(h.audit[0]!.error!, /no connection within/);
      assert.equal(h.tenant.usage.open, 0);
    } finally {
      await h.close();
    }
  });
});

describe('metrics', () => {
  test('connections by decision and reason, and bytes by direction', async () => {
    const h = await harness(loopbackAllow());
    try {
      const ok = await connectThrough({ port: h.port }, `pypi.sandpit.test:${upstream.port}`);
      await echo(ok.socket, 'abc');
      ok.socket.end();
      await once(ok.socket, 'close');
      await connectThrough({ port: h.port }, 'evil.sandpit.test:443');
      await settle();
      const counts = (await h.metrics.connections.get()).values.map((v) => [
        v.labels.decision,
        v.labels.reason,
        v.value,
      ]);
      assert.deepEqual(counts.sort(), [
        ['allowed', 'allowlist', 1],
        ['denied', 'not-allowed', 1],
      ]);
      const bytes = (await h.metrics.bytes.get()).values.map((v) => [v.labels.direction, v.value]);
      assert.deepEqual(bytes.sort(), [
        ['in', 3],
        ['out', 3],
      ]);
    } finally {
      await h.close();
    }
  });
});
