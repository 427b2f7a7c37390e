/**
 * Egress by allowlist on the real engine (the cases shared with the oci backend are in
 * egress-cases.ts, which says how no packet leaves the machine), and what is Docker's alone: warm
 * pool containers with their own gates, and a restarted gateway adopting an egress session.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { EgressAuditRecord } from '../../../src/api/audit.js';
import type { RunRequestInput } from '../../../src/api/run.js';
import { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { LABELS, MANAGED_FILTER } from '../../../src/backends/docker/labels.js';
import { DEFAULT_POOL_OPTIONS } from '../../../src/backends/docker/pool/pool-options.js';
import { wireDocker } from '../../../src/cmd/wiring.js';
import { createSocketGates, SOCKET_NAME } from '../../../src/egress/socket-gates.js';
import { requireDocker } from '../../support/docker.js';
import { connectThrough } from '../../support/egress.js';
import { runExec, sessionId, sessionSpec } from '../../support/sessions.js';
import {
  allow,
  auditCases,
  egressHarness,
  gateCases,
  packageCases,
  probeCases,
  runEgress,
  sessionGateCases,
  wiredCases,
} from './egress-cases.js';

const h = egressHarness(
  'docker',
  async (gates) => new DockerBackend({ docker: await requireDocker(), gates }),
);

packageCases(h);
probeCases(h, 'runc');
probeCases(h, 'runsc');
auditCases(h);
sessionGateCases(h, 'runsc');
gateCases(h);
wiredCases(h, (ctx, egress) => wireDocker(ctx, { pools: false, egress }));

describe('warm pools stay warm', () => {
  test("an egress pool container's socket refuses until a run claims it; the run is served warm through it", async () => {
    const docker = await requireDocker();
    const pooled = new DockerBackend({
      docker,
      gates: h.gates,
      pool: { ...DEFAULT_POOL_OPTIONS, minIdle: 1, maxSize: 1, maxTotal: 2 },
    });
    try {
      const network = allow(`echo.sandpit.test:${h.echo.port}`, '127.0.0.1/32');
      const request: RunRequestInput = {
        template: 'python',
        code: String.raw`
import http.client, os
c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10); c.set_tunnel('echo.sandpit.test', int(os.environ['ECHO_PORT']))
c.connect(); c.sock.sendall(b'warm'); print(c.sock.recv(4).decode())
`,
        env: [{ name: 'ECHO_PORT', value: String(h.echo.port) }],
        network,
      };
      const first = await runEgress(h, request, pooled);
      assert.equal(first.stdout, 'warm\n', first.stderr);
      assert.ok(await pooled.pool!.filled(60_000), 'the egress pool filled');
      const idle = await docker.listContainers({
        filters: { label: [MANAGED_FILTER, `${LABELS.kind}=pool`, `${LABELS.owner}=${pooled.owner}`] },
      });
      const dir = idle.map((c) => c.Labels[LABELS.egressDir]).find((d) => d !== undefined);
      assert.ok(dir, 'the idle pool container has its own gate');
      const refused = await connectThrough(
        { path: join(dir, SOCKET_NAME) },
        `echo.sandpit.test:${h.echo.port}`,
      );
      assert.equal(refused.status, 403);
      assert.match(refused.reason, /this sandbox has no egress/);
      const second = await runEgress(h, request, pooled);
      assert.equal(second.served, 'warm');
      assert.equal(second.stdout, 'warm\n', second.stderr);
    } finally {
      await pooled.close();
    }
  });
});

describe('a restarted gateway', () => {
  test('adopts an egress session: it listens at its socket again, bound to the session', async () => {
    const docker = await requireDocker();
    const instance = `egress-${process.pid}-${Date.now().toString(36)}`;
    const first = new DockerBackend({ docker, gates: h.gates, instanceId: instance });
    const spec = sessionSpec(
      { template: 'python', network: allow(`echo.sandpit.test:${h.echo.port}`, '127.0.0.1/32') },
      h.policy,
    );
    const id = sessionId('egress-adopt');
    await first.sessions.createSession(spec, { sessionId: id, principal: 'tester' });
    // The first gateway goes; its session stays, and its socket's directory with it.
    first.sessions.detachAll();
    const secondAudit: EgressAuditRecord[] = [];
    const secondGates = createSocketGates({
      root: h.root,
      proxy: h.proxyWith((r) => secondAudit.push(r), { 'echo.sandpit.test': ['127.0.0.1'] }),
    });
    const second = new DockerBackend({ docker, gates: secondGates, instanceId: instance });
    const adoption = await second.sessions.adoptSessions();
    const adopted = adoption.adopted.find((a) => a.sessionId === id);
    assert.ok(adopted, JSON.stringify(adoption.lost));
    try {
      const exec = await runExec(
        adopted.sandbox,
        adopted.spec,
        {
          command: [
            'python3',
            '-c',
            `import http.client; c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10); c.set_tunnel('echo.sandpit.test', ${h.echo.port}); c.connect(); c.sock.sendall(b'again'); print(c.sock.recv(5).decode())`,
          ],
        },
        { policy: h.policy },
      );
      assert.equal(exec.stdout.text, 'again\n', exec.stderr.text);
      await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(
        secondAudit.map((r) => [r.sessionId, r.decision]),
        [[id, 'allowed']],
      );
    } finally {
      await adopted.sandbox.close('Deleted');
      await secondGates.close();
    }
  });
});
