// kube-cluster.sh restarts what died and `down` + `up` gives back a Ready node. These tests kill the
// API server and take the whole cluster down, so they disturb anyone else using it: they live in
// their own tier (`test/run.sh kube-disruptive`), which CI runs after the other kube tests but the
// burst (test/run-all.sh), when nothing else uses the cluster.
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import {
  podFinishedOrStuck,
  processAlive as alive,
  runCommand,
  waitForPod,
  withCluster,
} from '../../support/kube/index.js';

async function nodeReady(): Promise<boolean> {
  const cluster = await withCluster();
  const node = await cluster.core.readNode({ name: cluster.env.nodeName });
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

describe('kube-cluster.sh lifecycle (disruptive)', () => {
  test('a killed kube-apiserver is restarted by `up`', { timeout: 180_000 }, async (t) => {
    const cluster = await withCluster();
    const pid = await cluster.stopComponent('kube-apiserver', 'SIGKILL');

    const status = await cluster.script(['status']);
    assert.notEqual(status.code, 0, 'status should report the dead apiserver');
    assert.match(status.stdout, /^kube-apiserver +stopped$/m);

    const up = await cluster.script(['up'], { timeoutMs: 150_000 });
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stderr, /started kube-apiserver/);
    assert.doesNotMatch(up.stderr, /started (etcd|kube-controller-manager|kube-scheduler|kubelet) /);
    const restarted = await cluster.componentPid('kube-apiserver');
    assert.notEqual(restarted, pid);
    assert.ok(await nodeReady());
    t.diagnostic(`up after killing the apiserver: ${Math.round(up.durationMs)} ms`);
  });

  test(
    '`down` stops everything and removes the pods’ containers from containerd; `up` restores a Ready node',
    { timeout: 300_000 },
    async (t) => {
      const cluster = await withCluster();
      const { stateDir } = cluster.env;
      // leave a running pod behind, so that `down` has a kubelet container to remove
      const ns = await cluster.createNamespace('lifecycle');
      await cluster.createPod(ns, {
        metadata: { name: 'idle' },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          dnsPolicy: 'None',
          dnsConfig: { nameservers: ['127.0.0.1'] },
          containers: [
            {
              name: 'main',
              image: cluster.env.pauseImage,
              imagePullPolicy: 'Never',
              resources: { limits: { cpu: '50m', memory: '16Mi' } },
            },
          ],
        },
      });
      const running = await waitForPod(
        cluster.kc,
        ns,
        'idle',
        (p) => p.status?.phase === 'Running' || podFinishedOrStuck(p),
        {
          timeoutMs: 60_000,
        },
      );
      const containerId = running.status?.containerStatuses?.[0]?.containerID?.replace(
        /^containerd:\/\//,
        '',
      );
      assert.ok(containerId, 'the pod has a containerd container');
      assert.equal((await cluster.ctr(['containers', 'info', containerId])).code, 0);
      const pids = await Promise.all(
        ['containerd', 'etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet'].map(
          (c) => cluster.componentPid(c),
        ),
      );

      const down = await cluster.script(['down'], { timeoutMs: 120_000 });
      assert.equal(down.code, 0, down.stderr);
      assert.deepEqual(
        pids.filter((p) => alive(p)),
        [],
        'down left component processes running',
      );
      // No shim of that containerd is left, nor anything mounted for the pods.
      const shims = await runCommand('pgrep', [
        '-f',
        `containerd-shim-runc-v2 .*-address ${cluster.env.containerd.address}`,
      ]);
      assert.equal(shims.stdout.trim(), '', 'down left shims running');
      const mounts = await runCommand('findmnt', ['-rn', '-o', 'TARGET']);
      assert.deepEqual(
        mounts.stdout
          .split('\n')
          .filter(
            (m) =>
              m.startsWith(path.join(stateDir, 'kubelet')) ||
              m.startsWith(path.dirname(cluster.env.containerd.address)),
          ),
        [],
        'down left mounts',
      );
      const status = await cluster.script(['status']);
      assert.notEqual(status.code, 0);

      const up = await cluster.script(['up'], { timeoutMs: 240_000 });
      assert.equal(up.code, 0, up.stderr);
      assert.doesNotMatch(up.stderr, /building /, 'warm up must not rebuild the binaries');
      assert.ok(await nodeReady());
      // etcd was wiped: the namespace from before `down` is gone, and so is the pod's container
      await assert.rejects(cluster.core.readNamespace({ name: ns }));
      const gone = await cluster.ctr(['containers', 'info', containerId]);
      assert.notEqual(gone.code, 0, 'the pod container came back after down + up');
      assert.match(gone.stderr, /not found/);
      t.diagnostic(`warm up after down: ${Math.round(up.durationMs)} ms`);
    },
  );
});
