import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { currentOwner } from '../../../../src/backends/docker/owner.js';
import { LABELS } from '../../../../src/backends/docker/labels.js';
import { bundleDir, type OciLayout } from '../../../../src/backends/oci/layout.js';
import { reapOci } from '../../../../src/backends/oci/reaper.js';

// A layout of its own under a temporary folder, and runtimes that do not exist (they list no
// containers): only the bundles written here are looked at.
const dir = mkdtempSync(join(tmpdir(), 'sandpit-reaper-'));
const layout: OciLayout = {
  runDir: join(dir, 'run'),
  rootfsDir: join(dir, 'rootfs'),
  cgroupRoot: join(dir, 'cgroup'),
};
const host = { layout, binaries: { runc: join(dir, 'no-runc'), runsc: join(dir, 'no-runsc') } };
after(() => rmSync(dir, { recursive: true, force: true }));

function bundle(id: string, annotations: Record<string, string>, root = `${dir}/rootfs/${id}`): void {
  mkdirSync(bundleDir(layout, id), { recursive: true });
  writeFileSync(
    join(bundleDir(layout, id), 'config.json'),
    JSON.stringify({ annotations, root: { path: root } }),
  );
}

describe('the oci reaper and egress gates', () => {
  test("a kept bundle's gate directory is in use; an abandoned one's is not, and its bundle goes", async () => {
    bundle('sandpit-kept', { [LABELS.owner]: currentOwner(), [LABELS.egressDir]: '/gates/aaaaaaaaaaaaaaaa' });
    bundle('sandpit-plain', { [LABELS.owner]: currentOwner() });
    bundle('sandpit-dead', {
      [LABELS.owner]: `${hostname()}:999999999:1`,
      [LABELS.egressDir]: '/gates/bbbbbbbbbbbbbbbb',
    });
    bundle('sandpit-expired', {
      [LABELS.owner]: currentOwner(),
      [LABELS.expires]: '1',
      [LABELS.egressDir]: '/gates/cccccccccccccccc',
    });
    const result = await reapOci(host, { now: 2 });
    assert.deepEqual([...result.egressDirsInUse], ['/gates/aaaaaaaaaaaaaaaa']);
    assert.deepEqual(result.removed.sort(), ['sandpit-dead', 'sandpit-expired']);
    assert.deepEqual([...result.rootsInUse].sort(), [
      `${dir}/rootfs/sandpit-kept`,
      `${dir}/rootfs/sandpit-plain`,
    ]);
  });
});
