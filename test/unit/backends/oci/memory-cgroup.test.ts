import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { makeMemoryCgroup } from '../../../../src/backends/oci/memory-cgroup.js';
import { cgroupDir, type OciLayout } from '../../../../src/backends/oci/layout.js';

const MiB = 1024 ** 2;

describe('makeMemoryCgroup: a gVisor sandbox’s memory cgroup, made before runsc so that its OOM count outlives the sandbox', () => {
  const roots: string[] = [];
  after(() => Promise.all(roots.map((r) => rm(r, { recursive: true, force: true }))));
  const layout = async (): Promise<OciLayout> => {
    const root = await mkdtemp(join(tmpdir(), 'sandpit-cgroup-'));
    roots.push(root);
    return { runDir: join(root, 'run'), rootfsDir: join(root, 'rootfs'), cgroupRoot: root };
  };

  test('the folder is the run’s in the memory controller, with the spec’s memory limit', async () => {
    const l = await layout();
    await makeMemoryCgroup(l, 'r1', { limit: 256 * MiB, swap: 256 * MiB, disableOOMKiller: false });
    const dir = cgroupDir(l, 'memory', 'r1');
    assert.equal(await readFile(join(dir, 'memory.limit_in_bytes'), 'utf8'), String(256 * MiB));
  });

  test('memory+swap gets the spec’s swap, after the limit, where the kernel counts swap', async () => {
    const l = await layout();
    const dir = cgroupDir(l, 'memory', 'r2');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'memory.memsw.limit_in_bytes'), 'unlimited');
    await makeMemoryCgroup(l, 'r2', { limit: 128 * MiB, swap: 128 * MiB, disableOOMKiller: false });
    assert.equal(await readFile(join(dir, 'memory.memsw.limit_in_bytes'), 'utf8'), String(128 * MiB));
  });

  test('no memory+swap file: no swap accounting, and nothing written for it', async () => {
    const l = await layout();
    await makeMemoryCgroup(l, 'r3', { limit: MiB, swap: MiB, disableOOMKiller: false });
    await assert.rejects(readFile(join(cgroupDir(l, 'memory', 'r3'), 'memory.memsw.limit_in_bytes')));
  });
});
