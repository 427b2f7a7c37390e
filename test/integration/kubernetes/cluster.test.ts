// The local Kubernetes test cluster (test/env/kube-cluster.sh) does what the backends rely on, on
// both RuntimeClasses it installs: runc (the default) and gvisor. Needs the cluster up (the tests
// fail with the command to start it) and the sandbox images built (images/build.sh; `up` copies
// them into the node's containerd). Traffic: the API server and kubelet on loopback only.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { release } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { AuthenticationV1Api, AuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import {
  attachToPod,
  describePod,
  execInPod,
  framed,
  isNotFound,
  kubeTest,
  parseEnvLines,
  podFinishedOrStuck,
  podRunning,
  REPO_ROOT,
  runCommand,
  type KubeCluster,
  stuckReason,
  waitForPod,
  withCluster,
} from '../../support/kube/index.js';

const IMAGE = process.env.SANDPIT_KUBE_TEST_IMAGE ?? 'sandpit/python:3.11';
const CHART = path.join(REPO_ROOT, 'test/fixtures/trivial-chart');

/** The RuntimeClasses the cluster installs: each test below runs on both. */
const RUNTIMES = [
  { name: 'runc', runtimeClassName: undefined },
  { name: 'gvisor', runtimeClassName: 'gvisor' },
] as const;

/** Attaches, sends one job line (the pipe holds it until the process reads), reads its in-band exit status. */
async function attachedJob(cluster: KubeCluster, ns: string, pod: string, job: string): Promise<string> {
  const attached = await attachToPod(cluster.kc, ns, pod, 'main');
  try {
    attached.write(`${job}\n`);
    return await attached.readUntil(/exit \d+\n/);
  } finally {
    attached.close();
  }
}

/** A pod in the shape sandbox pods take: restricted profile, no token, no DNS, limits, local image. */
function restrictedPod(
  name: string,
  command: string[],
  spec: Partial<NonNullable<V1Pod['spec']>> = {},
): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { 'sandpit.dev/test': 'cluster' } },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      dnsPolicy: 'None',
      dnsConfig: { nameservers: ['127.0.0.1'] },
      terminationGracePeriodSeconds: 1,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 1000,
        runAsGroup: 1000,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'main',
          image: IMAGE,
          imagePullPolicy: 'Never',
          command,
          workingDir: '/tmp',
          resources: {
            requests: { cpu: '10m', memory: '32Mi' },
            limits: { cpu: '500m', memory: '128Mi', 'ephemeral-storage': '64Mi' },
          },
          securityContext: {
            allowPrivilegeEscalation: false,
            privileged: false,
            readOnlyRootFilesystem: true,
            runAsNonRoot: true,
            runAsUser: 1000,
            capabilities: { drop: ['ALL'] },
          },
          volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
        },
      ],
      volumes: [{ name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } }],
      ...spec,
    },
  };
}

/** The output-at-exit case: numbered 8-byte lines, written with one write loop, then _exit. */
const BURST_LINES = 12_500;
const BURST_BYTES = BURST_LINES * 8;
const BURST_PODS = 12;
// Without the fix about a third of these pods lost output (below): two rounds of 12 would all
// keep theirs by chance less than once in ten thousand tries.
const BURST_ROUNDS = 2;
const BURST_PROGRAM = `
import os
view = memoryview(b"".join(b"%07d\\n" % i for i in range(${BURST_LINES})))
while view:
    view = view[os.write(1, view):]
os._exit(0)
`;
function burstOutput(): string {
  return Array.from({ length: BURST_LINES }, (_, i) => `${String(i).padStart(7, '0')}\n`).join('');
}

const CLUSTER_LOCK = '/run/sandpit-kube-cluster.lock';

/** The processes (pid and name) with `file` open. */
async function holdersOf(file: string): Promise<string[]> {
  const holders: string[] = [];
  for (const pid of (await readdir('/proc')).filter((d) => /^\d+$/.test(d))) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => []);
    const links = await Promise.all(fds.map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')));
    if (links.includes(file))
      holders.push(`${pid} ${(await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '?')).trim()}`);
  }
  return holders;
}

const PROBE = `
import os, sys
print("uid", os.getuid(), "gid", os.getgid())
try:
    # /home/sandbox belongs to uid 1000, so only a read-only rootfs can refuse this
    open("/home/sandbox/probe", "w")
    print("rootfs writable")
except OSError as e:
    print("rootfs read-only", e.errno)
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
# prctl(PR_GET_NO_NEW_PRIVS): gVisor does not print NoNewPrivs in /proc/self/status
import ctypes
print("CapEff", status["CapEff"].strip(), "NoNewPrivs", ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))
print("sa-token", os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount"))
print("resolv", " ".join(l.strip() for l in open("/etc/resolv.conf") if l.startswith("nameserver")))
print("python", sys.version.split()[0], "ok")
`;

describe('kubernetes test cluster', () => {
  for (const { name: runtime, runtimeClassName } of RUNTIMES) {
    const inClass = runtimeClassName ? { runtimeClassName } : {};

    test(
      `${runtime}: a restricted-profile pod runs python from a sandpit image and its log reads back through the API`,
      { timeout: 120_000 },
      kubeTest(async ({ t, cluster, ns }) => {
        await cluster.requireNodeImage(IMAGE);
        const started = performance.now();
        await cluster.createPod(ns, restrictedPod('py', ['python3', '-c', PROBE], inClass));
        const pod = await waitForPod(cluster.kc, ns, 'py', podFinishedOrStuck, { timeoutMs: 90_000 });
        const elapsed = Math.round(performance.now() - started);
        assert.equal(stuckReason(pod), undefined);
        assert.equal(pod.status?.phase, 'Succeeded', describePod(pod));
        assert.equal(pod.spec?.runtimeClassName, runtimeClassName);

        const log = await cluster.podLog(ns, 'py');
        assert.match(log, /^uid 1000 gid 1000$/m);
        assert.match(log, /^rootfs read-only 30$/m); // EROFS
        assert.match(log, /^CapEff 0000000000000000 NoNewPrivs 1$/m);
        assert.match(log, /^sa-token False$/m);
        assert.match(log, /^resolv nameserver 127\.0\.0\.1$/m);
        assert.match(log, /^python 3\.11\.\d+ ok$/m);
        t.diagnostic(`restricted python pod (${runtime}): create -> Succeeded in ${elapsed} ms`);
      }),
    );

    test(
      `${runtime}: activeDeadlineSeconds ends an endless loop: Failed / DeadlineExceeded`,
      { timeout: 90_000 },
      kubeTest(async ({ cluster, ns }) => {
        await cluster.requireNodeImage(IMAGE);
        // The deadline counts from when the kubelet takes the pod: under gVisor on a busy node, its
        // sandbox alone can take seconds to start.
        await cluster.createPod(
          ns,
          restrictedPod('spin', ['python3', '-c', 'print("spinning", flush=True)\nwhile True: pass'], {
            activeDeadlineSeconds: 10,
            ...inClass,
          }),
        );
        // It really ran before the deadline hit (a pod stuck on its image would also end DeadlineExceeded).
        await waitForPod(cluster.kc, ns, 'spin', (p) => podRunning(p) || podFinishedOrStuck(p), {
          timeoutMs: 60_000,
        });
        const pod = await waitForPod(cluster.kc, ns, 'spin', (p) => p.status?.phase === 'Failed', {
          timeoutMs: 60_000,
          description: 'pod spin to fail on its deadline',
        });
        assert.equal(pod.status?.reason, 'DeadlineExceeded', describePod(pod));
        assert.match(await cluster.podLog(ns, 'spin'), /spinning/);
      }),
    );

    test(
      `${runtime}: exec returns stdout, stderr and the exit code; stdin is length-framed`,
      { timeout: 90_000 },
      kubeTest(async ({ t, cluster, ns }) => {
        await cluster.requireNodeImage(IMAGE);
        await cluster.createPod(ns, restrictedPod('shell', ['sleep', '600'], inClass));
        await waitForPod(cluster.kc, ns, 'shell', (p) => podRunning(p) || podFinishedOrStuck(p), {
          timeoutMs: 60_000,
        });

        const simple = await execInPod(
          cluster.kc,
          ns,
          'shell',
          ['sh', '-c', 'echo out; echo err >&2; exit 3'],
          {
            container: 'main',
          },
        );
        assert.deepEqual([simple.exitCode, simple.stdout, simple.stderr], [3, 'out\n', 'err\n']);

        // 200 KiB of binary stdin: `head -c N` gives the reader its EOF (v4.channel.k8s.io cannot half-close).
        const payload = Buffer.alloc(200 * 1024);
        for (let i = 0; i < payload.length; i++) payload[i] = (i * 7919) % 251;
        const digest = createHash('sha256').update(payload).digest('hex');
        const res = await execInPod(
          cluster.kc,
          ns,
          'shell',
          framed(
            payload.length,
            'timeout -s KILL 20 python3 -c "import sys,hashlib; d=sys.stdin.buffer.read(); print(len(d), hashlib.sha256(d).hexdigest())"',
          ),
          { container: 'main', stdin: payload, timeoutMs: 30_000 },
        );
        assert.equal(res.exitCode, 0, res.stderr);
        assert.equal(res.stdout.trim(), `${payload.length} ${digest}`);

        const ok = await execInPod(cluster.kc, ns, 'shell', ['true'], { container: 'main' });
        assert.equal(ok.exitCode, 0);
        t.diagnostic(`exec round trip (true, ${runtime}): ${Math.round(ok.durationMs)} ms`);
      }),
    );

    test(
      `${runtime}: attach to a pre-started pod's stdin: one job in, its output and in-band exit status out (the warm-pool path)`,
      { timeout: 90_000 },
      kubeTest(async ({ t, cluster, ns }) => {
        await cluster.requireNodeImage(IMAGE);
        // The warm-pool shape: the main process waits on its attached stdin for one job line.
        const waiter = [
          'import subprocess, sys',
          'print("ready", flush=True)',
          'job = sys.stdin.readline()',
          'r = subprocess.run(["sh", "-c", job])',
          'print("exit", r.returncode, flush=True)',
        ].join('\n');
        const pod = restrictedPod('warm', ['python3', '-c', waiter], inClass);
        Object.assign(pod.spec!.containers[0]!, { stdin: true, stdinOnce: true });
        await cluster.createPod(ns, pod);
        await waitForPod(cluster.kc, ns, 'warm', (p) => podRunning(p) || podFinishedOrStuck(p), {
          timeoutMs: 60_000,
        });
        const t0 = performance.now();
        const out = await attachedJob(cluster, ns, 'warm', 'echo "job ran as $(id -u)"; exit 7');
        t.diagnostic(
          `attach, job in -> exit status out (${runtime}): ${Math.round(performance.now() - t0)} ms`,
        );
        assert.match(out, /job ran as 1000\nexit 7\n$/);
        const done = await waitForPod(cluster.kc, ns, 'warm', podFinishedOrStuck, { timeoutMs: 30_000 });
        assert.equal(done.status?.phase, 'Succeeded', describePod(done));
        // The pod log has what the attached client saw, the prompt included.
        assert.equal(await cluster.podLog(ns, 'warm'), 'ready\njob ran as 1000\nexit 7\n');
      }),
    );
  }

  /**
   * Debian's containerd 1.6.20 closed a container's log FIFOs as soon as its process exited, before
   * the shim had copied the rest (fixed upstream in 1.6.22, containerd PR #8659), so the end of an
   * output written just before the exit was lost: on it, 28 of 60 such runc pods and 19 of 60 gVisor
   * ones kept only 32,768 to 98,304 bytes. kube-cluster.sh runs a containerd built from
   * Debian's source with that fix.
   */
  for (const { name: runtime, runtimeClassName } of RUNTIMES) {
    test(
      `${runtime}: several pods writing ${BURST_BYTES} bytes right before they exit all keep their whole log (${BURST_ROUNDS} rounds of ${BURST_PODS})`,
      { timeout: 600_000 },
      kubeTest(async ({ t, cluster, ns }) => {
        await cluster.requireNodeImage(IMAGE);
        const expected = burstOutput();
        const losses: string[] = [];
        for (let round = 1; round <= BURST_ROUNDS; round++) {
          const names = Array.from({ length: BURST_PODS }, (_, i) => `burst-${round}-${i + 1}`);
          await Promise.all(
            names.map((name) =>
              cluster.createPod(
                ns,
                restrictedPod(
                  name,
                  ['python3', '-c', BURST_PROGRAM],
                  runtimeClassName ? { runtimeClassName } : {},
                ),
              ),
            ),
          );
          for (const name of names) {
            const pod = await waitForPod(cluster.kc, ns, name, podFinishedOrStuck, { timeoutMs: 120_000 });
            assert.equal(pod.status?.phase, 'Succeeded', describePod(pod));
            const log = await cluster.podLog(ns, name);
            if (log !== expected) losses.push(`${name} kept ${log.length} of ${expected.length} bytes`);
          }
          await Promise.all(
            names.map((name) =>
              cluster.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 }),
            ),
          );
        }
        t.diagnostic(`${BURST_ROUNDS * BURST_PODS} pods (${runtime}), incomplete logs: ${losses.length}`);
        assert.deepEqual(losses, [], 'the end of the output is missing from these pod logs');
      }),
    );
  }

  test(
    'gvisor: the pod runs on gVisor’s kernel (uname, /proc/version), the default RuntimeClass on the host’s',
    { timeout: 120_000 },
    kubeTest(async ({ cluster, ns }) => {
      await cluster.requireNodeImage(IMAGE);
      // Not dmesg: syslog(2) needs CAP_SYSLOG, and runsc applies the pod's seccomp profile (--oci-seccomp).
      const probe = ['sh', '-c', 'uname -r; cat /proc/version'];
      await cluster.createPod(ns, restrictedPod('host', probe));
      await cluster.createPod(ns, restrictedPod('gvisor', probe, { runtimeClassName: 'gvisor' }));
      for (const name of ['host', 'gvisor']) {
        const pod = await waitForPod(cluster.kc, ns, name, podFinishedOrStuck, { timeoutMs: 90_000 });
        assert.equal(pod.status?.phase, 'Succeeded', describePod(pod));
      }
      const gvisor = (await cluster.podLog(ns, 'gvisor')).split('\n');
      assert.equal(gvisor[0], '4.4.0', 'gVisor reports its own kernel release');
      assert.match(gvisor[1] ?? '', /^Linux version 4\.4\.0 /);
      // runc: the host's own kernel
      assert.equal((await cluster.podLog(ns, 'host')).split('\n')[0], release());
    }),
  );

  test('the RuntimeClasses installed are exactly those of deploy/runtimeclasses.yaml', async () => {
    const cluster = await withCluster();
    const file = await readFile(path.join(REPO_ROOT, 'deploy/runtimeclasses.yaml'), 'utf8');
    const want = parseAllDocuments(file).map(
      (d) => d.toJS() as { metadata: { name: string }; handler: string },
    );
    assert.deepEqual(
      want.map((c) => [c.metadata.name, c.handler]),
      [
        ['gvisor', 'runsc'],
        ['runc', 'runc'],
      ],
    );
    const res = await cluster.kubectl(['get', 'runtimeclasses', '-o', 'json']);
    assert.equal(res.code, 0, res.stderr);
    const installed = (
      JSON.parse(res.stdout) as { items: { metadata: { name: string; labels?: object }; handler: string }[] }
    ).items.filter((c) => c.metadata.labels && 'app.kubernetes.io/part-of' in c.metadata.labels);
    assert.deepEqual(
      installed.map((c) => [c.metadata.name, c.handler, c.metadata.labels]),
      want.map((c) => [c.metadata.name, c.handler, (c.metadata as { labels?: object }).labels]),
    );
  });

  test(
    'helm installs and uninstalls a trivial chart',
    { timeout: 120_000 },
    kubeTest(async ({ cluster, ns }) => {
      const install = await cluster.helm(
        [
          'install',
          'triv',
          CHART,
          '--namespace',
          ns,
          '--set',
          'greeting=hi there',
          '--wait',
          '--timeout',
          '60s',
        ],
        { timeoutMs: 90_000 },
      );
      assert.equal(install.code, 0, install.stderr);
      const cm = await cluster.core.readNamespacedConfigMap({ namespace: ns, name: 'triv-trivial' });
      assert.equal(cm.data?.greeting, 'hi there');
      assert.equal(cm.data?.kubeVersion, 'v1.20.2');

      const list = await cluster.helm(['list', '--namespace', ns, '--output', 'json']);
      assert.equal(list.code, 0, list.stderr);
      const releases = JSON.parse(list.stdout) as { name: string; status: string }[];
      assert.deepEqual(
        releases.map((r) => [r.name, r.status]),
        [['triv', 'deployed']],
      );

      const uninstall = await cluster.helm(['uninstall', 'triv', '--namespace', ns, '--wait'], {
        timeoutMs: 90_000,
      });
      assert.equal(uninstall.code, 0, uninstall.stderr);
      await assert.rejects(
        cluster.core.readNamespacedConfigMap({ namespace: ns, name: 'triv-trivial' }),
        isNotFound,
      );
    }),
  );

  test(
    'the operator and gateway tokens are plain users: RBAC grants them rights only through bindings',
    { timeout: 60_000 },
    kubeTest(async ({ cluster, ns }) => {
      const authn = cluster.kc.makeApiClient(AuthenticationV1Api);
      // A resource nobody grants: other tests bind the operator/gateway users to the chart's roles
      // cluster-wide, so "no rights at all" cannot be asserted on a shared cluster; this can.
      const probe = { namespace: ns, verb: 'get', group: 'rbac-probe.test.sandpit.dev', resource: 'probes' };
      for (const who of ['operator', 'gateway'] as const) {
        const review = await authn.createTokenReview({
          body: { spec: { token: cluster.env.identities[who].token } },
        });
        assert.equal(review.status?.authenticated, true);
        assert.equal(review.status?.user?.username, cluster.userOf(who));
        assert.deepEqual(review.status?.user?.groups, ['system:authenticated']);

        // Asked with the identity's own token, so authentication and authorization are both real.
        const authz = cluster.kubeConfigFor(who).makeApiClient(AuthorizationV1Api);
        const allowed = async (): Promise<boolean> =>
          (await authz.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: probe } } }))
            .status?.allowed === true;
        assert.equal(await allowed(), false, `${who} may already ${probe.verb} ${probe.resource}`);

        await cluster.rbac.createNamespacedRole({
          namespace: ns,
          body: {
            metadata: { name: `${who}-probes` },
            rules: [{ apiGroups: [probe.group], resources: [probe.resource], verbs: [probe.verb] }],
          },
        });
        await cluster.rbac.createNamespacedRoleBinding({
          namespace: ns,
          body: {
            metadata: { name: `${who}-probes` },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${who}-probes` },
            subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: cluster.userOf(who) }],
          },
        });
        // The RBAC authorizer reads bindings from an informer cache, with no event a client could
        // watch: retry briefly (bounded) until the cache has the new binding.
        let granted = false;
        for (let i = 0; i < 50 && !granted; i++) {
          granted = await allowed();
          if (!granted) await new Promise((r) => setTimeout(r, 100));
        }
        assert.ok(granted, `the RoleBinding did not grant ${who} ${probe.verb} ${probe.resource}`);
      }
    }),
  );

  test('pretty-printed API responses do not crash the apiserver (reflect2 fix for Go >= 1.18)', async () => {
    const cluster = await withCluster();
    // ?pretty=true is what curl clients get by default; v1.20's vendored reflect2 v1.0.1 segfaulted on it.
    const res = await runCommand(
      'curl',
      [
        '-fsS',
        '--max-time',
        '10',
        '--cacert',
        cluster.env.caFile,
        '-H',
        `Authorization: Bearer ${cluster.env.identities.admin.token}`,
        `${cluster.env.apiServer}/api/v1/namespaces/kube-system?pretty=true`,
      ],
      { timeoutMs: 20_000 },
    );
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /\n {2}"kind": "Namespace",\n/);
    assert.ok((await cluster.core.readNamespace({ name: 'kube-system' })).metadata?.uid);
  });

  test('kube-cluster.sh: `up` on a running cluster is a no-op (nothing restarted); env and status agree', async () => {
    const cluster = await withCluster();
    const pids = async (): Promise<string> =>
      (await runCommand('bash', ['-c', `cat ${cluster.env.stateDir}/run/*.pid`])).stdout;
    // `up` also copies images rebuilt since (another checkout may have): copy them first, so the
    // `up` timed below is the no-op itself.
    const synced = await cluster.script(['images'], { timeoutMs: 10 * 60_000 });
    assert.equal(synced.code, 0, synced.stderr);
    const before = await pids();
    // A daemon that inherited the script's lock would block every later up and down.
    assert.deepEqual(await holdersOf(CLUSTER_LOCK), [], `long-lived processes hold ${CLUSTER_LOCK}`);
    const up = await cluster.script(['up'], { timeoutMs: 60_000 });
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stderr, /already up/);
    assert.equal(await pids(), before, 'up restarted something');

    const status = await cluster.script(['status']);
    assert.equal(status.code, 0, status.stdout + status.stderr);
    assert.match(status.stdout, /^node\/localhost +Ready$/m);

    const env = parseEnvLines((await cluster.script(['env'])).stdout);
    for (const key of [
      'KUBECONFIG',
      'HELM',
      'KUBECTL',
      'SANDPIT_KUBE_API_SERVER',
      'SANDPIT_KUBE_OPERATOR_TOKEN',
      'SANDPIT_KUBE_OPERATOR_KUBECONFIG',
      'SANDPIT_KUBE_GATEWAY_TOKEN',
      'SANDPIT_KUBE_GATEWAY_KUBECONFIG',
    ]) {
      assert.ok(env[key], `env does not print ${key}`);
    }
    const version = await cluster.kubectl(['version', '-o', 'json']);
    assert.equal(version.code, 0, version.stderr);
    assert.equal(
      (JSON.parse(version.stdout) as { serverVersion: { gitVersion: string } }).serverVersion.gitVersion,
      'v1.20.2',
    );
  });
});
