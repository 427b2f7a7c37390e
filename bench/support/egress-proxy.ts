/**
 * The egress bench's proxy, a process of its own as in the gateway: sandpit's egress proxy with the
 * production floor (this host's addresses included), an audit trail writing a file, metrics, and
 * two doors: a TCP listener on 127.0.0.1 (the Kubernetes path) and a sandbox's Unix socket gate
 * (the Docker path). `bench.sandpit.test` resolves to 127.0.0.1 through a test resolver, loopback
 * is named by the allowlist, and the dialer refuses anything off loopback. Argument: the upstream
 * port. Prints {"port": N, "socket": PATH}.
 */
import { mkdtempSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { toEntry } from '../../src/api/egress.js';
import { ownAddresses } from '../../src/cmd/egress.js';
import { buildFloor } from '../../src/egress/floor.js';
import { createEgressProxy } from '../../src/egress/proxy.js';
import { createSocketGates, SOCKET_NAME } from '../../src/egress/socket-gates.js';
import { createTenant, DEFAULT_EGRESS_LIMITS } from '../../src/egress/tenant.js';
import { createAuditTrail } from '../../src/observability/audit-trail.js';
import { createAuditMetrics, createEgressMetrics } from '../../src/observability/metrics.js';
import { loopbackDialer, testResolver } from '../../test/support/egress.js';

const upstreamPort = Number(process.argv[2]);
const dir = mkdtempSync(join(tmpdir(), 'sandpit-egress-bench-'));
const registry = new Registry();
const audit = createAuditTrail({
  logger: pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true })),
  metrics: createAuditMetrics(registry),
  file: { path: join(dir, 'audit.jsonl'), maxBytes: 100 * 1024 ** 2, maxFiles: 2, flushIntervalMs: 100 },
});
await audit.open();
const proxy = createEgressProxy({
  floor: buildFloor({ ownAddresses: ownAddresses() }),
  // Many rounds of 50 MB: the byte limit is not what this measures.
  limits: { ...DEFAULT_EGRESS_LIMITS, maxBytes: Number.MAX_SAFE_INTEGER },
  backend: 'docker',
  audit: (r) => audit.record(r),
  resolve: testResolver({ 'bench.sandpit.test': ['127.0.0.1'] }),
  dial: loopbackDialer(),
  metrics: createEgressMetrics(registry),
});
const tenant = createTenant({ runId: 'bench' }, 'bench', {
  egress: 'allowlist',
  allow: [`bench.sandpit.test:${upstreamPort}`, '127.0.0.1/32'].map(toEntry),
});
const tcp = createServer({ allowHalfOpen: true }, (s) => proxy.accept(s, () => ({ tenant })));
tcp.listen(0, '127.0.0.1');
await new Promise((r) => tcp.once('listening', r));
const gates = createSocketGates({ root: join(dir, 'egress'), proxy });
const gate = await gates.open();
gate.bind(tenant);
process.stdout.write(
  `${JSON.stringify({ port: (tcp.address() as AddressInfo).port, socket: join(gate.dir, SOCKET_NAME) })}\n`,
);
