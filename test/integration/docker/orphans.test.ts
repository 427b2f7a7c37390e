/**
 * Containers never outlive a crashed gateway for long: a running job's runner exits when its
 * owner's attach stream closes (a kill -9 of `sandpit run`), and a long-running backend reaps
 * the leftovers of dead sandpit processes periodically, not only at its own start.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { after, before, test } from 'node:test';
import type Docker from 'dockerode';
import { buildContainerConfig } from '../../../src/backends/docker/container-config.js';
import { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { BUILT_CLI, ensureBuilt } from '../../support/built-cli.js';
import { requireDocker, runId, spec } from '../../support/docker.js';

let docker: Docker;
before(async () => {
  ensureBuilt();
  docker = await requireDocker();
});

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    assert.ok(Date.now() < deadline, `${what} within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const state = async (id: string): Promise<string | undefined> =>
  docker
    .getContainer(id)
    .inspect()
    .then(
      (i) => i.State.Status,
      () => undefined,
    );

test('a running job stops by itself once the gateway that attached it dies (kill -9)', async () => {
  const cli = spawn(
    process.execPath,
    [BUILT_CLI, 'run', '-t', 'python', '-c', 'import time; time.sleep(120)'],
    {
      stdio: 'ignore',
      env: { ...process.env, SANDPIT_POOL_ENABLED: 'false' },
    },
  );
  const owner = `${hostname()}:${cli.pid}:`;
  let id = '';
  await waitFor(
    'the run’s container running',
    async () => {
      const list = await docker.listContainers({ filters: { label: ['sandpit.dev/kind=run'] } });
      id = list.find((c) => (c.Labels['sandpit.dev/owner'] ?? '').startsWith(owner))?.Id ?? '';
      return id !== '';
    },
    30_000,
  );
  cli.kill('SIGKILL');
  // The job's deadline is 30 s away: only the end of the runner's stdin can stop it this soon.
  await waitFor('the container stopped', async () => (await state(id)) !== 'running', 10_000);
  await docker.getContainer(id).remove({ force: true });
});

test('a long-running backend reaps the leftovers of a dead sandpit process periodically', async () => {
  const backend = new DockerBackend({ docker });
  after(() => backend.close());
  // A pool container whose owner, on this host, is certainly gone.
  const config = buildContainerConfig(spec({ template: 'bash', code: '' }), {
    name: `sandpit-pool-orphan-${runId()}`,
    kind: 'pool',
    owner: `${hostname()}:999999999:0`,
  });
  const orphan = await docker.createContainer(config);
  await orphan.start();
  backend.startReaping(500);
  await waitFor('the orphan removed', async () => (await state(orphan.id)) === undefined, 15_000);
});

test('the reaper never touches a container sandpit did not make, whatever labels it got from its image', async () => {
  const backend = new DockerBackend({ docker });
  after(() => backend.close());
  // Made from a sandpit image by someone else (as the kubelet does): it inherits managed-by; even
  // an expiry label in the past does not make it sandpit's.
  const foreign = await docker.createContainer({
    name: `not-sandpits-${runId()}`,
    Image: 'sandpit/bash:5',
    Cmd: ['sleep', '60'],
    Labels: { 'sandpit.dev/expires-at': '1' },
    HostConfig: { NetworkMode: 'none' },
  });
  try {
    const info = await foreign.inspect();
    assert.equal(info.Config.Labels['sandpit.dev/managed-by'], 'sandpit', 'inherited from the image');
    const removed = await backend.reap();
    assert.ok(!removed.some((name) => name.startsWith('not-sandpits-')), `reaped ${removed.join(', ')}`);
    assert.ok(await state(foreign.id), 'still there');
  } finally {
    await foreign.remove({ force: true }).catch(() => undefined);
  }
});
