// Sessions end to end in Kubernetes mode: two built `sandpit serve` replicas with
// sandbox.backend: kubernetes (the gateway identity, bound to deploy/gateway-rbac.yaml, never
// admin) and a real operator process. The seed's curl flow and the MCP flow over Streamable HTTP
// work as on Docker; one session is served by both replicas in turn, survives a restart of the
// replica that made it (its state lives in the Sandbox object, its Lease and its runner: each
// replica lists it, and answers for the execs the other ran), and outlives a replica killed while
// it held it (the other takes it over once the Lease lets it).
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { Channel } from '../../src/gateway/http/exec-ws.js';
import { Terminal } from '../e2e/exec-ws-client.js';
import { connectHttp, ensureBuilt, startServe, type Served } from '../e2e/helpers.js';
import {
  mcpSessionFlow,
  restClient,
  seedCurlFlow,
  JSON_TYPE,
  type RestClient,
} from '../e2e/session-flows.js';
import {
  failureMarkingTest,
  startSuite,
  stopSuite,
  type Suite,
} from '../integration/kubernetes/operator-harness.js';
import { withCluster } from '../support/kube/index.js';
import { bindGatewayRbac } from './kube-gateway.js';
import { CONTRACT_SANDBOX_CONFIG } from './target.js';

const TOKEN = 'kube-sessions-token-0123456789';
/** The seed's body names the image python:3.11 (built offline, and loaded into the cluster under that name too). */
const SANDBOX_CONFIG = { ...CONTRACT_SANDBOX_CONFIG, imageAllowlist: ['sandpit/*', 'python:3.11'] };

let suite: Suite;
const replicas: Served[] = [];
let failed = false;

function gatewayConfig(s: Suite, instanceId: string): object {
  return {
    server: { instanceId },
    auth: { token: TOKEN },
    sandbox: { backend: 'kubernetes', ...SANDBOX_CONFIG },
    kubernetes: {
      gateway: { kubeconfig: s.cluster.env.identities.gateway.kubeconfigPath, namespace: s.ns },
      operator: { leaseNamespace: s.ns },
    },
    logging: { level: 'debug' },
  };
}

describe(
  'sessions through sandpit serve in Kubernetes mode (built CLI, two replicas)',
  { timeout: 900_000 },
  () => {
    before(async () => {
      ensureBuilt();
      suite = await startSuite(await withCluster(), 'sessions-kubernetes', { sandbox: SANDBOX_CONFIG });
      await bindGatewayRbac(suite.cluster, suite.ns);
      replicas.push(await startServe(gatewayConfig(suite, 'replica-a')));
      replicas.push(await startServe(gatewayConfig(suite, 'replica-b')));
    });
    after(async () => {
      for (const r of replicas) {
        const code = await r.stop();
        if (code !== 0) failed = true;
      }
      if (failed) for (const r of replicas) for (const l of r.logs) process.stderr.write(`# serve: ${l}\n`);
      await stopSuite(suite, failed, (l) => process.stderr.write(`# ${l}\n`));
    });
    const it = failureMarkingTest(300_000, () => (failed = true));
    const a = () => restClient(() => replicas[0]!.url, TOKEN);
    const b = () => restClient(() => replicas[1]!.url, TOKEN);

    it("the seed's curl flow, then an artifact the script wrote is downloaded", () => seedCurlFlow(a()));

    it('MCP over Streamable HTTP: three commands share files and state in one session', async () => {
      const connected = await connectHttp(`${replicas[0]!.url}/mcp`, TOKEN);
      try {
        await mcpSessionFlow(connected);
      } finally {
        await connected.close();
      }
    });

    it('one session, served by both replicas in turn, across a restart of the one that made it and its kill', async () => {
      const id = await a().createSession('{"template":"python"}');
      assert.equal((await a().rest('PUT', `/sessions/${id}/files/n`, '1')).status, 201);
      const bump = ['python3', '-c', 'p="n"; n=int(open(p).read())+1; open(p,"w").write(str(n)); print(n)'];
      const onA = await a().exec(id, bump);
      assert.equal(onA.stdout, '2\n');
      // The other replica lists it from its Sandbox, without taking it over (A still holds it).
      const listed = await b().rest('GET', '/sessions');
      const entry = (listed.json.sessions as { id: string; state: string; image: string }[]).find(
        (s) => s.id === id,
      );
      assert.equal(entry?.state, 'Ready', listed.text);
      // The shape A gives of the session it serves, with the same facts.
      const own = ((await a().rest('GET', '/sessions')).json.sessions as (typeof entry)[]).find(
        (s) => s.id === id,
      );
      const facts = (v: typeof entry) => {
        const { lastActivityAt: _l, idleExpiresAt: _i, execs: _e, ...rest } = v as Record<string, unknown>;
        return rest;
      };
      assert.deepEqual(Object.keys(entry).sort(), Object.keys(own ?? {}).sort());
      assert.deepEqual(facts(entry), facts(own!));
      // It finds it by its Sandbox, takes the session's Lease over and re-attaches.
      const onB = await b().exec(id, bump);
      assert.equal(onB.stdout, '3\n');
      // A's exec is answered on B from the runner's history, and is in B's log before its own.
      const result = await b().rest('GET', `/sessions/${id}/exec/${String(onA.execId)}`);
      assert.equal(result.status, 200, result.text);
      assert.deepEqual([result.json.stdout, result.json.exitCode], ['2\n', 0]);
      const logged = async (r: RestClient) => {
        const logs = await r.rest('GET', `/sessions/${id}/logs`);
        assert.equal(logs.status, 200, logs.text);
        return (logs.json.execs as { execId: string; result: { stdout: string } }[]).map((e) => [
          e.execId,
          e.result.stdout,
        ]);
      };
      assert.deepEqual(await logged(b()), [
        [onA.execId, '2\n'],
        [onB.execId, '3\n'],
      ]);
      // Its exec WebSocket on the replica that holds it now: streamed stdin, then its end.
      const t = new Terminal(replicas[1]!.url, id, { Authorization: `Bearer ${TOKEN}` });
      await t.opened();
      t.start({ shell: 'wc -c; cat n' });
      t.send(Channel.stdin, 'x'.repeat(1000));
      t.send(Channel.stdinEnd);
      assert.equal(await t.closed, 1000);
      assert.equal(t.exit?.exitCode, 0, JSON.stringify(t.exit));
      assert.equal(t.output, '1000\n3');
      const seen = await b().rest('GET', `/sessions/${id}`);
      assert.equal(seen.status, 200, seen.text);
      assert.equal(seen.json.state, 'Ready');
      // The replica that made it restarts: the session lives on, and it serves it again.
      assert.equal(await replicas[0]!.stop(), 0);
      replicas[0] = await startServe(gatewayConfig(suite, 'replica-a'));
      // Back on the restarted replica, over its WebSocket first: it takes the session over again.
      const back = new Terminal(replicas[0].url, id, { Authorization: `Bearer ${TOKEN}` });
      await back.opened();
      back.start({ command: ['cat', 'n'] });
      assert.equal(await back.closed, 1000);
      assert.equal(back.output, '3');
      assert.equal((await a().exec(id, bump)).stdout, '4\n');
      // The restarted replica's log has the execs both ran (the WebSocket's included).
      const all = await logged(a());
      assert.deepEqual(all.slice(0, 2), [
        [onA.execId, '2\n'],
        [onB.execId, '3\n'],
      ]);
      assert.equal(all.length, 5, JSON.stringify(all));
      // Killed while it holds the session (SIGKILL: nothing let go, its Lease still names it).
      const leaseHolder = ['get', 'lease', id, '-n', suite.ns, '-o', 'jsonpath={.spec.holderIdentity}'];
      const holder = async () => (await suite.cluster.kubectl(leaseHolder)).stdout;
      const dead = await holder();
      assert.ok(dead, 'replica a holds the session');
      process.kill(replicas[0].pid, 'SIGKILL');
      assert.equal(await holder(), dead, 'the killed replica let nothing go');
      // The other replica's requests wait for the holder, are refused BUSY until the Lease expires,
      // then one takes the session over: its files kept.
      const killedAt = Date.now();
      let taken: Awaited<ReturnType<RestClient['rest']>>;
      for (;;) {
        taken = await b().rest('GET', `/sessions/${id}/files/n`);
        if (taken.status !== 429) break;
        assert.equal((taken.json.error as { code?: string }).code, 'BUSY', taken.text);
        assert.ok(Date.now() - killedAt < 120_000, 'taken over within 2 minutes');
      }
      assert.equal(taken.status, 200, taken.text);
      assert.equal(taken.text, '4');
      assert.notEqual(await holder(), dead, 'replica b holds it now');
      assert.equal((await b().exec(id, bump)).stdout, '5\n');
      replicas[0] = await startServe(gatewayConfig(suite, 'replica-a'));
      assert.equal((await b().rest('GET', `/sessions/${id}/files/n`)).text, '5');
      const deleted = await b().rest('DELETE', `/sessions/${id}`);
      assert.equal(deleted.json.state, 'Deleted', deleted.text);
      const gone = await a().rest('POST', `/sessions/${id}/exec`, '{"command":["true"]}', JSON_TYPE);
      assert.equal(gone.status, 404, gone.text);
    });
  },
);
