// kube-cluster.sh restarts what died and `down` + `up` gives back a Ready node. These tests kill the
// API server and take the whole cluster down, so they disturb anyone else using it: they live in
// their own tier (`test/run.sh kube-disruptive`), which CI runs last, after the other kube tests.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { podFinishedOrStuck, runCommand, waitForPod, withCluster } from '../../support/kube/index.js';

async function pidOf(stateDir: string, component: string): Promise<number> {
  return Number((await readFile(path.join(stateDir, 'run', `${component}.pid`), 'utf8')).trim());
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function nodeReady(): Promise<boolean> {
  const cluster = await withCluster();
  const node = await cluster.core.readNode({ name: cluster.env.nodeName });
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

describe('kube-cluster.sh lifecycle (disruptive)', () => {
  test('a killed kube-apiserver is restarted by `up`', { timeout: 180_000 }, async (t) => {
    const cluster = await withCluster();
    const pid = await pidOf(cluster.env.stateDir, 'kube-apiserver');
    assert.ok(alive(pid));
    process.kill(pid, 'SIGKILL'); // a process the cluster script started, by its recorded PID
    for (let i = 0; alive(pid) && i < 100; i++) await sleep(50); // not our child: no exit event to wait on

    const status = await cluster.script(['status']);
    assert.notEqual(status.code, 0, 'status should report the dead apiserver');
    assert.match(status.stdout, /^kube-apiserver +stopped$/m);

    const up = await cluster.script(['up'], { timeoutMs: 150_000 });
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stderr, /started kube-apiserver/);
    assert.doesNotMatch(up.stderr, /started (etcd|kube-controller-manager|kube-scheduler|kubelet) /);
    const restarted = await pidOf(cluster.env.stateDir, 'kube-apiserver');
    assert.notEqual(restarted, pid);
    assert.ok(await nodeReady());
    t.diagnostic(`up after killing the apiserver: ${Math.round(up.durationMs)} ms`);
  });

  test(
    '`down` stops everything and removes the k8s_ containers; `up` restores a Ready node',
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
      await waitForPod(
        cluster.kc,
        ns,
        'idle',
        (p) => p.status?.phase === 'Running' || podFinishedOrStuck(p),
        {
          timeoutMs: 60_000,
        },
      );
      const pids = await Promise.all(
        ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet'].map((c) =>
          pidOf(stateDir, c),
        ),
      );

      const down = await cluster.script(['down'], { timeoutMs: 120_000 });
      assert.equal(down.code, 0, down.stderr);
      assert.deepEqual(
        pids.filter((p) => alive(p)),
        [],
        'down left component processes running',
      );
      const left = await runCommand('docker', ['ps', '-aq', '--filter', 'name=^/k8s_']);
      assert.equal(left.stdout.trim(), '', 'down left k8s_ containers');
      const status = await cluster.script(['status']);
      assert.notEqual(status.code, 0);

      const up = await cluster.script(['up'], { timeoutMs: 240_000 });
      assert.equal(up.code, 0, up.stderr);
      assert.doesNotMatch(up.stderr, /building /, 'warm up must not rebuild the binaries');
      assert.ok(await nodeReady());
      // etcd was wiped: the namespace from before `down` is gone
      await assert.rejects(cluster.core.readNamespace({ name: ns }));
      t.diagnostic(`warm up after down: ${Math.round(up.durationMs)} ms`);
    },
  );
});
