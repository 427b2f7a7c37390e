// Many gateways and many tenants in Kubernetes mode: two `sandpit serve` processes (the built CLI,
// stateless MCP as the chart renders more than one replica) share one cluster as the static gateway
// identity (deploy/gateway-rbac.yaml, bound in the gateway's namespace and in each tenant's, never
// admin), with three tokens mapped to three tenant namespaces; a real operator watches them all.
//   - a run made through one gateway is read and cancelled through the other;
//   - tenant B reaches none of tenant A's runs or sessions, through every /openapi.json path (the
//     exec WebSocket's upgrade included: refused, never attached) and every MCP tool, on both
//     gateways (404 / NOT_FOUND);
//   - a restarted gateway adopts the sessions it finds in the tenants' namespaces at start-up;
//   - concurrent run and session creates through both gateways stop exactly at the tenant's
//     ResourceQuota, and the refused ones get the busy error naming it;
//   - sandbox_health and `sandpit doctor` check the permissions in every tenant namespace.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { GATEWAY_ROLE } from '../../src/backends/kubernetes/permissions.js';
import { Terminal } from '../e2e/exec-ws-client.js';
import {
  callTool,
  CLI,
  cleanEnv,
  connectHttp,
  ensureBuilt,
  startServe,
  tempDir,
  textOf,
  waitFor,
  type Connected,
  type Served,
} from '../e2e/helpers.js';
import {
  failureMarkingTest,
  getRun,
  installOperatorApi,
  bindLeaseRole,
  OperatorProcess,
} from '../integration/kubernetes/operator-harness.js';
import { withCluster, type KubeCluster } from '../support/kube/index.js';
import { bindGatewayRbac, gatewayBackend, LEASE_NAME } from './kube-gateway.js';
import { CONTRACT_SANDBOX_CONFIG } from './target.js';

const TOKEN = { a: 'tenant-a-token-0001', b: 'tenant-b-token-0002', q: 'tenant-q-token-0003' };
/** The cap of tenant Q: SandboxRun objects in its namespace, and Sandbox objects (sessions). */
const QUOTA = 3;
const QUOTA_NAME = 'sandpit-tenant';
const QUOTA_RESOURCES = ['count/sandboxruns.sandpit.dev', 'count/sandboxes.sandpit.dev'];
/** Runs that stay alive long enough to be read and cancelled (the contract policy's ceiling is 30 s). */
const SLEEPER = { template: 'python', code: "import time\nprint('started', flush=True)\ntime.sleep(28)" };

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

let cluster: KubeCluster;
let home: string;
const ns = { a: '', b: '', q: '' };
let operator: OperatorProcess;
const gateways: Served[] = [];
const clients: Connected[] = [];
let config: Record<string, unknown>;
let failed = false;
/** Tenant A's session made by the walk, left for the restarted gateway to adopt. */
let walkedSession: string | undefined;

async function rest(
  gw: Served,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  raw?: string,
): Promise<Reply> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      ...(raw !== undefined ? { 'Content-Type': 'application/octet-stream' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : raw !== undefined ? { body: raw } : {}),
  });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed };
}

const errorCode = (r: Reply): unknown => (r.body.error as { code?: unknown } | undefined)?.code;

function structured(result: CallToolResult): Record<string, unknown> {
  assert.ok(!result.isError, `tool failed: ${textOf(result)}`);
  assert.ok(result.structuredContent);
  return result.structuredContent;
}

async function mcp(gw: Served, token: string): Promise<Connected> {
  const c = await connectHttp(`${gw.url}/mcp`, token);
  clients.push(c);
  return c;
}

async function createQuota(namespace: string): Promise<void> {
  const hard = Object.fromEntries(QUOTA_RESOURCES.map((r) => [r, String(QUOTA)]));
  await cluster.core.createNamespacedResourceQuota({
    namespace,
    body: { metadata: { name: QUOTA_NAME }, spec: { hard } },
  });
  // The quota admits creates once the controller has counted what the namespace holds.
  await waitFor(
    'the ResourceQuota to be counted',
    async () => {
      const q = await cluster.core.readNamespacedResourceQuota({ namespace, name: QUOTA_NAME });
      return QUOTA_RESOURCES.every(
        (r) => q.status?.hard?.[r] === String(QUOTA) && q.status.used?.[r] !== undefined,
      )
        ? true
        : undefined;
    },
    60_000,
  );
}

/** Asserts a 429 BUSY naming tenant Q's quota and what it refused (runs or sessions). */
function assertQuotaRefusal(r: Reply, what: 'runs' | 'sessions'): void {
  assert.equal(r.status, 429, JSON.stringify(r.body));
  assert.equal(errorCode(r), 'BUSY');
  const message = String((r.body.error as { message?: unknown }).message);
  assert.match(
    message,
    new RegExp(`^busy, retry later: ResourceQuota ${QUOTA_NAME} in namespace ${ns.q} allows no more ${what}`),
  );
}

describe(
  'many gateways, many tenants (sandpit serve ×2, sandbox.backend: kubernetes)',
  { timeout: 900_000 },
  () => {
    before(async () => {
      ensureBuilt();
      cluster = await withCluster();
      await installOperatorApi(cluster);
      home = await cluster.createNamespace('tenancy');
      ns.a = await cluster.createNamespace('tenant-a');
      ns.b = await cluster.createNamespace('tenant-b');
      ns.q = await cluster.createNamespace('tenant-q');
      await bindLeaseRole(cluster, home);
      await bindGatewayRbac(cluster, home);
      for (const tenant of [ns.a, ns.b, ns.q]) await bindGatewayRbac(cluster, tenant, [GATEWAY_ROLE]);
      await createQuota(ns.q);
      operator = OperatorProcess.start(cluster, {
        namespace: home,
        sandbox: CONTRACT_SANDBOX_CONFIG,
        operator: { namespaces: [home, ns.a, ns.b, ns.q] },
      });
      await operator.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
      config = {
        server: { stateless: true },
        sandbox: { backend: 'kubernetes', ...CONTRACT_SANDBOX_CONFIG },
        auth: {
          tokens: [
            { name: 'tenant-a', token: TOKEN.a, namespace: ns.a },
            { name: 'tenant-b', token: TOKEN.b, namespace: ns.b },
            { name: 'tenant-q', token: TOKEN.q, namespace: ns.q },
          ],
        },
        kubernetes: {
          gateway: { kubeconfig: cluster.env.identities.gateway.kubeconfigPath, namespace: home },
          operator: { leaseNamespace: home },
        },
        logging: { level: 'debug' },
      };
      gateways.push(await startServe(config), await startServe(config));
    });

    after(async () => {
      for (const c of clients) await c.close().catch(() => undefined);
      const codes = [];
      for (const gw of gateways) codes.push(await gw.stop());
      if (codes.some((c) => c !== 0)) failed = true;
      if (failed) {
        gateways.forEach((gw, i) => gw.logs.forEach((l) => process.stderr.write(`# serve ${i + 1}: ${l}\n`)));
        process.stderr.write(`# operator log: ${operator?.logFile}\n`);
        for (const n of [home, ns.a, ns.b, ns.q].filter(Boolean))
          for (const line of (await cluster.diagnostics(n)).split('\n')) process.stderr.write(`# ${line}\n`);
      }
      await operator?.stop(failed);
      for (const n of [home, ns.a, ns.b, ns.q].filter(Boolean)) await cluster?.deleteNamespace(n);
      assert.deepEqual(codes, [0, 0], 'both gateways exit cleanly on SIGTERM');
    });

    const it = failureMarkingTest(300_000, () => (failed = true));

    it('sandbox_health on each gateway: ok, with the permissions checked in every tenant namespace', async () => {
      for (const gw of gateways) {
        const h = structured(await callTool((await mcp(gw, TOKEN.a)).client, 'sandbox_health'));
        assert.equal(h.ok, true, String(h.detail));
        assert.match(String(h.detail), new RegExp(`tenants' in ${ns.a}, ${ns.b}, ${ns.q}`));
      }
    });

    it('health and `sandpit doctor` name the missing permission in a tenant namespace without the Role', async () => {
      const unbound = await cluster.createNamespace('tenant-unbound');
      try {
        const backend = gatewayBackend(cluster, home, {
          lease: { namespace: home, name: LEASE_NAME },
          tenantNamespaces: [ns.a, unbound],
        });
        const h = await backend.health();
        await backend.close();
        assert.equal(h.ok, false);
        assert.match(h.detail, new RegExp(`create sandboxruns\\.sandpit\\.dev in ${unbound}`));
        assert.doesNotMatch(h.detail, new RegExp(`(sandpit\\.dev|pods|pods/log) in ${ns.a}\\b`));
        const dir = tempDir('doctor');
        const file = join(dir, 'config.json');
        const tokens = (config.auth as { tokens: object[] }).tokens;
        const doctor = (cfg: object) => {
          writeFileSync(file, JSON.stringify(cfg));
          return spawnSync(process.execPath, [CLI, 'doctor', '--config', file], {
            env: cleanEnv(),
            encoding: 'utf8',
            timeout: 120_000,
          });
        };
        const good = doctor({ ...config, audit: { enabled: false } });
        assert.equal(good.status, 0, good.stdout + good.stderr);
        assert.match(good.stdout, /^ok {3}cluster /m);
        const bad = doctor({
          ...config,
          audit: { enabled: false },
          auth: { tokens: [...tokens, { name: 'unbound', token: 'unbound-token-0004', namespace: unbound }] },
        });
        assert.equal(bad.status, 1, bad.stdout + bad.stderr);
        assert.match(
          bad.stdout,
          new RegExp(`FAIL cluster .*create sandboxruns\\.sandpit\\.dev in ${unbound}`),
        );
      } finally {
        await cluster.deleteNamespace(unbound);
      }
    });

    it('a run created through one gateway is read and cancelled through the other; the first sees it end Cancelled', async () => {
      const [one, two] = gateways as [Served, Served];
      const created = await rest(one, 'POST', '/runs?wait=false', TOKEN.a, SLEEPER);
      assert.equal(created.status, 202, JSON.stringify(created.body));
      const runId = String(created.body.runId);
      // A run that does not wait is answered once its SandboxRun exists: the other gateway reads it at once.
      const [run, seenAtOnce] = await Promise.all([
        getRun(cluster, ns.a, runId),
        rest(two, 'GET', `/runs/${runId}`, TOKEN.a),
      ]);
      assert.ok(run, `the SandboxRun in the tenant's namespace ${ns.a} exists when the 202 comes`);
      assert.equal(seenAtOnce.status, 200, JSON.stringify(seenAtOnce.body));
      assert.match(run.metadata.annotations?.['sandpit.dev/owner'] ?? '', /^token:[0-9a-f]{16}$/);
      const running = await waitFor(
        'gateway 2 to read the run Running',
        async () => {
          const r = await rest(two, 'GET', `/runs/${runId}`, TOKEN.a);
          assert.equal(r.status, 200, JSON.stringify(r.body));
          return r.body.phase === 'Running' ? r.body : undefined;
        },
        90_000,
      );
      assert.equal(running.runId, runId);
      assert.equal(running.backend, 'kubernetes');
      assert.equal(running.image, 'sandpit/python:3.11');
      const viaMcp = structured(await callTool((await mcp(two, TOKEN.a)).client, 'get_run', { runId }));
      assert.equal(viaMcp.phase, 'Running');

      const cancelled = await rest(two, 'DELETE', `/runs/${runId}`, TOKEN.a);
      assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
      assert.equal(cancelled.body.phase, 'Cancelled');
      assert.equal(cancelled.body.reason, 'Cancelled');
      assert.equal((await getRun(cluster, ns.a, runId))?.spec.cancel, true);
      const seen = await waitFor(
        'gateway 1, which follows the run, to see it end Cancelled',
        async () => {
          const r = await rest(one, 'GET', `/runs/${runId}`, TOKEN.a);
          return r.body.phase === 'Running' ? undefined : r.body;
        },
        60_000,
      );
      assert.equal(seen.phase, 'Cancelled');
      assert.equal(seen.reason, 'Cancelled');
    });

    it("a finished run made through one gateway reads the same through the other: the operator's outcome and output", async () => {
      const [one, two] = gateways as [Served, Served];
      const done = await rest(one, 'POST', '/runs', TOKEN.a, {
        template: 'python',
        code: 'print("across replicas")\nraise SystemExit(3)',
      });
      assert.equal(done.status, 200, JSON.stringify(done.body));
      assert.equal(done.body.exitCode, 3);
      const runId = String(done.body.runId);
      const read = await rest(two, 'GET', `/runs/${runId}`, TOKEN.a);
      assert.equal(read.status, 200);
      for (const key of [
        'phase',
        'reason',
        'exitCode',
        'stdout',
        'stdoutBytes',
        'image',
        'template',
        'limits',
      ])
        assert.deepEqual(read.body[key], done.body[key], key);
      // cancel_run of a finished run answers it as it is, on either gateway.
      const c = structured(await callTool((await mcp(two, TOKEN.a)).client, 'cancel_run', { runId }));
      assert.equal(c.phase, 'Failed');
      assert.equal(c.exitCode, 3);
    });

    it("tenant B reaches none of tenant A's runs or sessions: every /openapi.json path and every MCP tool, on both gateways", async (t) => {
      const [one] = gateways as [Served, Served];
      const live = await rest(one, 'POST', '/runs?wait=false', TOKEN.a, SLEEPER);
      assert.equal(live.status, 202);
      const runId = String(live.body.runId);
      // The sessions the backend offers: on a backend without them, session paths stay uncovered (said below).
      const session = await rest(one, 'POST', '/sessions', TOKEN.a, { template: 'python' });
      const sessionId = session.status === 201 ? String(session.body.id) : undefined;
      if (!sessionId) assert.equal(errorCode(session), 'UNSUPPORTED', JSON.stringify(session.body));
      const uncovered: string[] = [];

      const doc = (await (await fetch(`${one.url}/openapi.json`)).json()) as {
        paths: Record<string, Record<string, unknown>>;
      };
      const idOf = (path: string): string | undefined =>
        path.startsWith('/runs/') ? runId : path.startsWith('/sessions/') ? sessionId : undefined;
      const fill = (path: string, id: string): string =>
        path.replace('{id}', id).replace('{execId}', 'exec-000000000000').replace('{path}', 'notes.txt');
      const bodies: Record<string, { json?: unknown; raw?: string }> = {
        post: { json: { command: ['true'] } },
        patch: { json: { ttlSeconds: 120 } },
        put: { raw: 'x' },
      };
      let walked = 0;
      for (const gw of gateways) {
        for (const [path, methods] of Object.entries(doc.paths)) {
          for (const method of Object.keys(methods)) {
            if (!path.includes('{id}')) continue; // no other tenant's id in it: creates and lists, checked below
            const id = idOf(path);
            if (!id) {
              uncovered.push(`${method.toUpperCase()} ${path}`);
              continue;
            }
            if ((methods[method] as { responses?: Record<string, unknown> }).responses?.['101']) {
              // Refused before the upgrade; were it to open, the exec would leave a file behind.
              const ws = new Terminal(gw.url, id, { Authorization: `Bearer ${TOKEN.b}` });
              ws.ws.once('open', () => ws.start({ shell: 'touch intruder' }));
              await assert.rejects(ws.opened(), (e: { status: number; message: string }) => {
                assert.equal(e.status, 404, `${path} as tenant B: ${e.message}`);
                assert.equal(
                  (JSON.parse(e.message) as { error?: { code?: string } }).error?.code,
                  'NOT_FOUND',
                );
                return true;
              });
              walked++;
              continue;
            }
            const body = bodies[method] ?? {};
            const r = await rest(gw, method.toUpperCase(), fill(path, id), TOKEN.b, body.json, body.raw);
            assert.equal(
              r.status,
              404,
              `${method.toUpperCase()} ${path} as tenant B: ${JSON.stringify(r.body)}`,
            );
            assert.equal(errorCode(r), 'NOT_FOUND', `${method.toUpperCase()} ${path}`);
            walked++;
          }
        }
        const listed = await rest(gw, 'GET', '/sessions', TOKEN.b);
        assert.equal(
          listed.status === 200 || errorCode(listed) === 'UNSUPPORTED',
          true,
          JSON.stringify(listed.body),
        );
        if (listed.status === 200)
          assert.ok(
            !JSON.stringify(listed.body).includes(sessionId ?? '\u0000'),
            "tenant A's session is not listed",
          );

        const client = (await mcp(gw, TOKEN.b)).client;
        const { tools } = await client.listTools();
        const covered: string[] = [];
        for (const tool of tools) {
          const props = (tool.inputSchema.properties ?? {}) as Record<string, { type?: string }>;
          const takes = ['runId', 'sessionId'].filter((k) => k in props);
          if (takes.length === 0) continue;
          const id = takes.includes('runId') ? runId : sessionId;
          if (!id) {
            uncovered.push(`tool ${tool.name}`);
            continue;
          }
          const args: Record<string, unknown> = {};
          for (const key of tool.inputSchema.required ?? []) {
            const type = props[key]?.type;
            args[key] =
              type === 'array'
                ? ['true']
                : type === 'number' || type === 'integer'
                  ? 1
                  : type === 'boolean'
                    ? false
                    : type === 'object'
                      ? {}
                      : 'notes.txt';
          }
          for (const key of takes) args[key] = key === 'runId' ? runId : sessionId;
          const res = (await client.callTool({ name: tool.name, arguments: args })) as CallToolResult;
          assert.equal(res.isError, true, `${tool.name} as tenant B answered: ${textOf(res)}`);
          assert.equal(
            (res._meta?.['sandpit.dev/error'] as { code?: string } | undefined)?.code,
            'NOT_FOUND',
            `${tool.name}: ${textOf(res)}`,
          );
          covered.push(tool.name);
        }
        for (const name of ['get_run', 'cancel_run']) assert.ok(covered.includes(name), `${name} was walked`);
      }
      assert.ok(walked >= 2 * 2, `the run paths were walked on both gateways (${walked} requests)`);
      if (sessionId) {
        // No exec of tenant B's reached the session: the WebSocket's would have left this file.
        const intruder = await rest(one, 'GET', `/sessions/${sessionId}/files/intruder`, TOKEN.a);
        assert.equal(intruder.status, 404, JSON.stringify(intruder.body));
        walkedSession = sessionId;
      }
      // Tenant B's DELETE /runs/:id and cancel_run touched nothing: A's run still runs, uncancelled.
      const still = await rest(one, 'GET', `/runs/${runId}`, TOKEN.a);
      assert.notEqual(still.body.phase, 'Cancelled');
      assert.notEqual((await getRun(cluster, ns.a, runId))?.spec.cancel, true);
      if (uncovered.length)
        t.diagnostic(
          `not covered (the backend offers no sessions to own): ${[...new Set(uncovered)].join('; ')}`,
        );
      await rest(one, 'DELETE', `/runs/${runId}`, TOKEN.a);
    });

    it("a restarted gateway adopts, at start-up, the sessions in the tenants' namespaces", async () => {
      assert.ok(walkedSession, "the walk left tenant A's session");
      const id = walkedSession;
      // Open MCP clients would hold the stopping server's connections: closed first.
      for (const c of clients.splice(0)) await c.close();
      assert.equal(await gateways[0]!.stop(), 0, 'a graceful stop lets go of the session');
      gateways[0] = await startServe(config);
      const fresh = gateways[0];
      // Adopted before the server listened: listed before any request named it, from the tenant's namespace.
      assert.ok(
        fresh.logs.some((l) => l.includes('adopted live sessions')),
        `no adoption logged:\n${fresh.logs.join('\n')}`,
      );
      const listed = await rest(fresh, 'GET', '/sessions', TOKEN.a);
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      assert.ok(JSON.stringify(listed.body).includes(id), `listed: ${JSON.stringify(listed.body)}`);
      const ran = await rest(fresh, 'POST', `/sessions/${id}/exec`, TOKEN.a, { command: ['true'] });
      assert.equal(ran.status, 200, JSON.stringify(ran.body));
      const deleted = await rest(fresh, 'DELETE', `/sessions/${id}`, TOKEN.a);
      assert.equal(deleted.body.state, 'Deleted', JSON.stringify(deleted.body));
    });

    it("concurrent creates through both gateways stop exactly at the tenant's quota; the refused get the busy error naming it", async () => {
      const attempts = 8;
      const replies = await Promise.all(
        Array.from({ length: attempts }, (_, i) =>
          rest(gateways[i % 2]!, 'POST', '/runs', TOKEN.q, { template: 'python', code: `print(${i})` }),
        ),
      );
      const ran = replies.filter((r) => r.status === 200);
      const refused = replies.filter((r) => r.status === 429);
      assert.equal(
        ran.length,
        QUOTA,
        JSON.stringify(replies.map((r) => [r.status, r.body.phase ?? r.body.error])),
      );
      assert.equal(refused.length, attempts - QUOTA);
      for (const r of ran) assert.equal(r.body.phase, 'Succeeded', JSON.stringify(r.body));
      for (const r of refused) assertQuotaRefusal(r, 'runs');
      const objects = (await cluster.kubectl(['get', 'sandboxruns', '-n', ns.q, '-o', 'name'])).stdout;
      assert.equal(objects.split('\n').filter(Boolean).length, QUOTA);
    });

    it("concurrent session creates through both gateways stop exactly at the tenant's quota of Sandboxes", async () => {
      const attempts = 6;
      const replies = await Promise.all(
        Array.from({ length: attempts }, (_, i) =>
          rest(gateways[i % 2]!, 'POST', '/sessions', TOKEN.q, { template: 'bash' }),
        ),
      );
      const made = replies.filter((r) => r.status === 201);
      const summary = JSON.stringify(replies.map((r) => [r.status, r.body.state ?? r.body.error]));
      assert.equal(made.length, QUOTA, summary);
      for (const r of made) assert.equal(r.body.state, 'Ready', JSON.stringify(r.body));
      for (const r of replies.filter((x) => x.status !== 201)) assertQuotaRefusal(r, 'sessions');
      const objects = (await cluster.kubectl(['get', 'sandboxes', '-n', ns.q, '-o', 'name'])).stdout;
      assert.equal(objects.split('\n').filter(Boolean).length, QUOTA);
      // Nothing of the refused is left behind: no Sandbox, no pod beyond the quota's.
      const pods = await cluster.core.listNamespacedPod({
        namespace: ns.q,
        labelSelector: 'sandpit.dev/session',
      });
      assert.equal(pods.items.length, QUOTA);
      for (const [i, r] of made.entries()) {
        const gone = await rest(gateways[i % 2]!, 'DELETE', `/sessions/${String(r.body.id)}`, TOKEN.q);
        assert.equal(gone.body.state, 'Deleted', JSON.stringify(gone.body));
      }
    });
  },
);
