/**
 * Egress by allowlist on the oci backend, under runc and runsc: the cases the Docker tier runs
 * (../docker/egress-cases.ts, which says how no packet leaves the machine), and what is the oci
 * backend's own: nothing left on the host after an egress run, and the reaper's sweep of the gates
 * of sandboxes that are gone.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { LABELS } from '../../../src/backends/docker/labels.js';
import { bundlesDir, containerId } from '../../../src/backends/oci/layout.js';
import type { OciBackend } from '../../../src/backends/oci/oci-backend.js';
import { wireOci } from '../../../src/cmd/wiring.js';
import { makeOciBackend, OCI_LAYOUT, ociLeftovers } from '../../support/oci.js';
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
} from '../docker/egress-cases.js';

let oci: OciBackend;
const h = egressHarness('oci', async (gates) => (oci = await makeOciBackend({ gates })));

// npm is left to the Docker tier: its image would be unpacked for this file alone.
packageCases(h, { npm: false });
probeCases(h, 'runc');
probeCases(h, 'runsc');
auditCases(h);
sessionGateCases(h, 'runc');
sessionGateCases(h, 'runsc');
gateCases(h);
wiredCases(h, (ctx, egress) => wireOci(ctx, { reaping: false, egress }), {
  SANDPIT_SANDBOX_BACKEND: 'oci',
  SANDPIT_OCI_RUN_DIR: OCI_LAYOUT.runDir,
  SANDPIT_OCI_ROOTFS_DIR: OCI_LAYOUT.rootfsDir,
});

describe('on the host', () => {
  test('an egress run under runsc leaves nothing: no container, bundle, cgroup or gate', async () => {
    const before = readdirSync(h.root).sort();
    const r = await runEgress(h, {
      template: 'python',
      runtime: 'runsc',
      code: String.raw`
import http.client, os
c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10); c.set_tunnel('echo.sandpit.test', int(os.environ['ECHO_PORT']))
c.connect(); c.sock.sendall(b'gone'); print(c.sock.recv(4).decode())
`,
      env: [{ name: 'ECHO_PORT', value: String(h.echo.port) }],
      network: allow(`echo.sandpit.test:${h.echo.port}`, '127.0.0.1/32'),
    });
    assert.equal(r.stdout, 'gone\n', r.stderr);
    assert.deepEqual(await ociLeftovers(containerId(r.runId)), []);
    assert.deepEqual(readdirSync(h.root).sort(), before);
  });

  test("the reaper sweeps the gates of sandboxes that are gone; a kept bundle's gate and a listening one stay", async () => {
    const gate = () => join(h.root, randomBytes(8).toString('hex'));
    // A gate whose gateway died with its sandbox: no bundle names it, nobody listens in it.
    const stale = gate();
    mkdirSync(stale);
    // The gate of a sandbox a live owner keeps (its socket not listening at this instant).
    const mounted = gate();
    mkdirSync(mounted);
    const id = containerId(`egress-kept-${process.pid}-${Date.now().toString(36)}`);
    const bundle = join(bundlesDir(OCI_LAYOUT), id);
    mkdirSync(bundle, { recursive: true });
    writeFileSync(
      join(bundle, 'config.json'),
      JSON.stringify({ annotations: { [LABELS.owner]: oci.owner, [LABELS.egressDir]: mounted } }),
    );
    // A gate this process listens in, named by no bundle yet (a sandbox being made).
    const listening = await h.gates.open();
    try {
      await oci.reap();
      assert.equal(existsSync(stale), false, 'the stale gate is swept');
      assert.equal(existsSync(mounted), true, "the kept bundle's gate stays");
      assert.equal(existsSync(listening.dir), true, 'the listening gate stays');
    } finally {
      rmSync(bundle, { recursive: true, force: true });
      rmSync(mounted, { recursive: true, force: true });
      await listening.close();
    }
  });
});
