// The gateway's Kubernetes backend serving sessions on the real cluster, as the static gateway
// identity bound to deploy/gateway-rbac.yaml (never admin): Sandbox → Ready → Lease → attach →
// the runner's session protocol. The session pods come from session-pods.ts (the operator's part,
// played by the test until the Sandbox controller lands).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoordinationV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { ANNOTATION_CHANNEL_KEY, LABEL_SESSION } from '../../../src/api/v1alpha1/labels.js';
import { SANDBOX, type Sandbox } from '../../../src/api/v1alpha1/sandbox.js';
import type { KubernetesBackend } from '../../../src/backends/kubernetes/kubernetes-backend.js';
import type { SessionSandbox } from '../../../src/backends/sessions.js';
import type { EffectiveSessionSpec } from '../../../src/policy/session.js';
import { AppError } from '../../../src/shared/errors.js';
import { withCluster, type KubeCluster } from '../../support/kube/index.js';
import { MiB, readAll, runExec, sessionId, sessionSpec } from '../../support/sessions.js';
import { bindGatewayRbac, gatewayBackend } from '../../contract/kube-gateway.js';
import { installOperatorApi } from './operator-harness.js';
import { getSandbox, serveSessionPods, sessionPod, waitRunnerReady, writeStatus } from './session-pods.js';

let cluster: KubeCluster;
let ns: string;
let pods: ReturnType<typeof serveSessionPods>;
const backends: KubernetesBackend[] = [];

function gateway(
  replicaId: string,
  sessions: { lingerMs?: number; takeWaitMs?: number } = {},
): KubernetesBackend {
  const b = gatewayBackend(cluster, ns, {
    replicaId,
    sessions,
  });
  backends.push(b);
  return b;
}

const id = (): string =>
  sessionId('ses')
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-');

const ms = (v: unknown): number => (v instanceof Date ? v.getTime() : Date.parse(String(v)));

async function lease(name: string) {
  return cluster.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: ns, name });
}

async function refusal(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof AppError, `an AppError, not ${String(e)}`);
    return e;
  }
  assert.fail('expected a refusal');
}

describe('kubernetes sessions through the gateway backend', { timeout: 900_000 }, () => {
  before(async () => {
    cluster = await withCluster();
    await installOperatorApi(cluster);
    ns = await cluster.createNamespace('gateway-sessions');
    await bindGatewayRbac(cluster, ns);
    pods = serveSessionPods(cluster, ns);
  });
  after(async () => {
    pods.stop();
    await Promise.all(backends.map((b) => b.close()));
    if (process.env.SANDPIT_KEEP_TEST_NAMESPACES !== '1') await cluster.deleteNamespace(ns);
  });

  let a: KubernetesBackend;
  let first: { sandbox: SessionSandbox; spec: EffectiveSessionSpec; id: string };

  test('create → three execs sharing files → download → the Sandbox, its Lease and the open request', async () => {
    a = gateway('replica-a');
    const spec = sessionSpec({
      template: 'python',
      env: [{ name: 'GREETING', value: 'hello' }],
      secrets: [{ name: 'TOKEN', value: 's3cret' }],
    });
    const sid = id();
    const sandbox = await a.sessions.createSession(spec, { sessionId: sid, principal: 'tester' });
    first = { sandbox, spec, id: sid };
    const one = await runExec(sandbox, spec, {
      shell: 'echo "$GREETING" > note.txt; mkdir -p data; echo 41 > data/n',
    });
    assert.equal(one.outcome.phase, 'Succeeded', one.stderr.text);
    await sandbox.writeFile({
      path: 'step.py',
      data: Buffer.from('print(int(open("data/n").read()) + 1)\n'),
    });
    const two = await runExec(sandbox, spec, { command: ['python3', 'step.py'] });
    assert.equal(two.stdout.text, '42\n');
    const three = await runExec(sandbox, spec, { shell: 'cat note.txt; echo "$TOKEN"; pwd; id -u; exit 3' });
    assert.equal(three.stdout.text, 'hello\ns3cret\n/workspace\n1000\n');
    assert.equal(three.outcome.exitCode, 3);
    const read = await sandbox.readFile({ path: 'note.txt', maxBytes: MiB });
    assert.equal((await readAll(read.data)).toString(), 'hello\n');

    const obj = await getSandbox(cluster, ns, sid);
    assert.equal(obj.metadata.annotations?.['sandpit.dev/principal'], 'tester');
    assert.equal(obj.metadata.labels?.['sandpit.dev/managed-by'], 'sandpit-gateway');
    assert.equal(obj.spec.idleTimeoutSeconds, spec.idleTimeoutSeconds);
    assert.equal(obj.spec.ttlSeconds, spec.ttlSeconds);
    assert.ok(obj.spec.env?.some((e) => e.name === 'GREETING' && e.value === 'hello'));
    assert.ok(!obj.spec.env?.some((e) => e.name === 'TOKEN'), 'no secret in the object');
    assert.ok(!JSON.stringify(obj).includes('s3cret'));
    const l = await lease(sid);
    assert.equal(l.spec?.holderIdentity, 'replica-a');
    assert.match(l.metadata?.annotations?.[ANNOTATION_CHANNEL_KEY] ?? '', /^[0-9a-f]{32}$/);
    assert.equal(l.metadata?.labels?.[LABEL_SESSION], sid);
    assert.equal(l.metadata?.ownerReferences?.[0]?.uid, obj.metadata.uid, 'the Sandbox owns its Lease');
  });

  test('execs run at once, a background one reports later, a deadline kills, output is capped', async () => {
    const { sandbox, spec } = first;
    const started = Date.now();
    const [x, y] = await Promise.all([
      runExec(sandbox, spec, { shell: 'sleep 2; echo x' }),
      runExec(sandbox, spec, { shell: 'sleep 2; echo y' }),
    ]);
    assert.equal(x.stdout.text + y.stdout.text, 'x\ny\n');
    assert.ok(Date.now() - started < 3900, 'the two ran at once');
    const bg = sandbox.exec(
      {
        argv: ['sh', '-c', 'sleep 1; echo late'],
        env: [],
        cwd: '',
        timeoutSeconds: 30,
        stdin: Buffer.alloc(0),
        background: true,
        tty: false,
        outputBytes: 65536,
      },
      { execId: 'bg1', onOutput: () => {} },
    );
    const quick = await runExec(sandbox, spec, { command: ['echo', 'now'] });
    assert.equal(quick.stdout.text, 'now\n');
    assert.equal((await bg.result).stdout.text, 'late\n');
    const slow = await runExec(sandbox, spec, { shell: 'sleep 30', timeoutSeconds: 1 });
    assert.equal(slow.outcome.phase, 'TimedOut');
    const big = await runExec(sandbox, spec, { shell: 'head -c 3000000 /dev/zero | tr "\\0" a' });
    assert.equal(big.stdout.truncated, true);
    assert.equal(big.stdout.bytes, 3_000_000);
  });

  test('paths stay in the workspace; artifacts stream as tar', async () => {
    const { sandbox, spec } = first;
    await runExec(sandbox, spec, { shell: 'ln -s /etc out' });
    const err = await refusal(sandbox.readFile({ path: 'out/passwd', maxBytes: MiB }));
    assert.notEqual(err.code, 'INTERNAL');
    const tar = await readAll(sandbox.artifacts({ path: 'data', maxBytes: MiB }));
    assert.ok(tar.includes(Buffer.from('data/n')), 'the tar names the file');
  });

  test('activity renews the Lease at most every 10 s, on the trailing edge', async () => {
    const { sandbox, spec } = first;
    const before = ms((await lease(first.id)).spec?.renewTime);
    const seen = new Set<number>();
    const until = Date.now() + 14_000;
    while (Date.now() < until) {
      await runExec(sandbox, spec, { command: ['true'] });
      seen.add(ms((await lease(first.id)).spec?.renewTime));
      await new Promise((r) => setTimeout(r, 500));
    }
    await new Promise((r) => setTimeout(r, 11_000));
    const after = ms((await lease(first.id)).spec?.renewTime);
    assert.ok(after > before, 'renewTime advanced');
    const times = [...seen].sort((p, q) => p - q);
    for (let i = 1; i < times.length; i++)
      assert.ok(times[i]! - times[i - 1]! >= 9_000, `writes at most every 10 s: ${[...seen].join(', ')}`);
  });

  test('a second replica takes the session over once the first lets go, and resyncs', async () => {
    const b = gateway('replica-b');
    const found = await b.sessions.findSession(first.id, 'tester');
    assert.equal(found.principal, 'tester');
    const r = await runExec(found.sandbox, found.spec, { shell: 'cat note.txt' });
    assert.equal(r.stdout.text, 'hello\n', 'the same workspace');
    assert.equal((await lease(first.id)).spec?.holderIdentity, 'replica-b');
    const other = await refusal(b.sessions.findSession(first.id, 'intruder'));
    assert.equal(other.code, 'NOT_FOUND', 'another principal does not see it');
    // The first replica gets its next request while b holds it: it waits for b's linger, then takes it back.
    const back = await runExec(first.sandbox, first.spec, { command: ['echo', 'back'] });
    assert.equal(back.stdout.text, 'back\n');
    assert.equal((await lease(first.id)).spec?.holderIdentity, 'replica-a');
  });

  test('a restarted gateway adopts the session by its Sandbox, a running exec included', async () => {
    const { sandbox } = first;
    const running = sandbox.exec(
      {
        argv: ['sh', '-c', 'sleep 3; echo survived'],
        env: [],
        cwd: '',
        timeoutSeconds: 30,
        stdin: Buffer.alloc(0),
        background: true,
        tty: false,
        outputBytes: 65536,
      },
      { execId: 'across', onOutput: () => {} },
    );
    void running.result.catch(() => {});
    await new Promise((r) => setTimeout(r, 500));
    await a.close(); // a graceful stop: detached, its Leases released
    const c = gateway('replica-c');
    const { adopted } = await c.sessions.adoptSessions();
    const mine = adopted.find((s) => s.sessionId === first.id);
    assert.ok(mine, `adopted: ${adopted.map((s) => s.sessionId).join(', ')}`);
    const exec = mine.execs.find((e) => e.execId === 'across');
    assert.ok(exec, 'the running exec is followed');
    assert.match((await exec.result).stdout.text, /survived/);
    const r = await runExec(mine.sandbox, mine.spec, { shell: 'cat note.txt' });
    assert.equal(r.stdout.text, 'hello\n');
    await mine.sandbox.close('Deleted');
    const gone = await cluster.kc
      .makeApiClient(CustomObjectsApi)
      .getNamespacedCustomObject({
        group: SANDBOX.group,
        version: SANDBOX.version,
        plural: SANDBOX.plural,
        namespace: ns,
        name: first.id,
      })
      .then(
        () => false,
        () => true,
      );
    assert.ok(gone, 'delete removes the Sandbox');
  });

  test('the gateway refuses a pod no sandpit object owns, even when a Sandbox names it', async () => {
    const sid = id();
    const kube = cluster.kc.makeApiClient(CustomObjectsApi);
    // A Sandbox the test makes as the gateway would, whose status (written as the operator) names a foreign pod.
    const body: Sandbox = {
      apiVersion: 'sandpit.dev/v1alpha1',
      kind: 'Sandbox',
      metadata: {
        name: sid,
        namespace: ns,
        labels: { 'sandpit.dev/managed-by': 'sandpit-gateway' },
        annotations: { 'sandpit.dev/principal': 'tester' },
      },
      spec: { template: 'python', ttlSeconds: 300 },
    };
    pods.stop(); // this one the test reconciles itself
    const made = (await kube.createNamespacedCustomObject({
      group: SANDBOX.group,
      version: SANDBOX.version,
      plural: SANDBOX.plural,
      namespace: ns,
      body,
    })) as Sandbox;
    const foreign = sessionPod(made, { name: `${sid}-foreign`, owned: false });
    await cluster.core.createNamespacedPod({ namespace: ns, body: foreign });
    await waitRunnerReady(cluster, ns, `${sid}-foreign`);
    await writeStatus(cluster, await getSandbox(cluster, ns, sid), {
      phase: 'Ready',
      podName: `${sid}-foreign`,
    });
    const d = gateway('replica-d');
    const err = await refusal(d.sessions.findSession(sid, 'tester'));
    assert.equal(err.code, 'FORBIDDEN', err.message);
    assert.match(err.message, /not controlled by Sandbox/);
  });
});
