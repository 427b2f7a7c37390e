/**
 * Sessions on the oci backend under each runtime, through the backend's session port: execs run
 * in the hardened sandbox (uid 1000, no capabilities; under runc NoNewPrivs and only lo, under
 * runsc gVisor's kernel), files go up and come down, and closing leaves no container, bundle or
 * cgroup. (The contract suite's session cases run against oci under runc: test/contract/oci.test.ts.)
 */
import assert from 'node:assert/strict';
import { release } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { containerId } from '../../../src/backends/oci/layout.js';
import type { OciBackend } from '../../../src/backends/oci/oci-backend.js';
import { makeOciBackend, ociLeftovers } from '../../support/oci.js';
import { readAll, runExec, sessionId, sessionPolicy, sessionSpec } from '../../support/sessions.js';

let backend: OciBackend;
before(async () => {
  backend = await makeOciBackend();
});
after(() => backend.close());

for (const runtime of ['runc', 'runsc'] as const) {
  describe(`a session under ${runtime}`, () => {
    test('execs share the workspace in the hardened sandbox; files go both ways; closing leaves nothing', async () => {
      const policy = sessionPolicy({ defaultRuntime: runtime, allowedRuntimes: [runtime] });
      const spec = sessionSpec({ template: 'bash' }, policy);
      const id = sessionId(runtime);
      const session = await backend.sessions.createSession(spec, { sessionId: id, principal: 'p' });
      try {
        await session.writeFile({ path: 'in.txt', data: Buffer.from('uploaded\n') });
        const probe = await runExec(
          session,
          spec,
          {
            shell:
              'id -u; grep -E "^(CapEff|NoNewPrivs)" /proc/self/status; ls /sys/class/net; cat in.txt; echo made > out.txt; uname -r',
          },
          { policy },
        );
        assert.equal(probe.outcome.exitCode, 0, probe.stderr.text);
        const lines = probe.stdout.text.split('\n');
        assert.deepEqual(lines.slice(0, 2), ['1000', 'CapEff:\t0000000000000000'], probe.stdout.text);
        assert.ok(lines.includes('uploaded'), probe.stdout.text);
        // gVisor's /proc and /sys show neither NoNewPrivs nor interfaces; its kernel is its own.
        if (runtime === 'runc') assert.deepEqual(lines.slice(2, 4), ['NoNewPrivs:\t1', 'lo']);
        assert.equal(lines.at(-2) === release(), runtime === 'runc', `kernel ${lines.at(-2)}`);
        const out = await session.readFile({ path: 'out.txt', maxBytes: 1024 });
        assert.equal((await readAll(out.data)).toString(), 'made\n');
      } finally {
        await session.close('Deleted');
      }
      assert.deepEqual(await ociLeftovers(containerId(`session-${id}`)), []);
    });
  });
}
