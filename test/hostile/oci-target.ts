/**
 * Hostile targets on the oci backend (runc and runsc driven directly; no pools, so every
 * configuration is cold): one gateway wired as `sandpit serve` wires it (test/hostile/gateway.ts),
 * allowing both runtimes.
 */
import { containerId } from '../../src/backends/oci/layout.js';
import type { BackendWiring } from '../../src/cmd/wiring.js';
import { makeOciBackend, OCI_LAYOUT, ociLeftovers } from '../support/oci.js';
import { GATEWAY_SECRETS, HOSTILE_SANDBOX_CONFIG, wireGateway } from './gateway.js';
import { serviceTarget } from './service-target.js';
import type { HostileConfig, Targets, Untrusted } from './untrusted.js';

const RUNSC = 'runsc';

export function ociTargets(): Targets {
  let host: Promise<BackendWiring> | undefined;
  return {
    async target(config: HostileConfig): Promise<Untrusted> {
      if (config.warm) throw new Error('the oci backend keeps no pools: no warm configuration');
      host ??= (async () => {
        // This machine's check first (root, cgroups, runtimes, images): a loud failure that says how.
        await (await makeOciBackend()).close();
        return wireGateway({
          sandbox: { backend: 'oci', ...HOSTILE_SANDBOX_CONFIG, allowedRuntimes: ['runc', RUNSC] },
          oci: { runDir: OCI_LAYOUT.runDir, rootfsDir: OCI_LAYOUT.rootfsDir },
        });
      })();
      const { service, metrics } = await host;
      return serviceTarget({
        config,
        service,
        metrics,
        secrets: GATEWAY_SECRETS,
        gvisorRuntime: RUNSC,
        async leftovers(made) {
          const ids = [
            ...made.runs.map((r) => containerId(r)),
            ...made.sessions.map((s) => containerId(`session-${s}`)),
          ];
          return (await Promise.all(ids.map((id) => ociLeftovers(id)))).flat();
        },
      });
    },
    async close() {
      if (host) await (await host).service.shutdown({ endSessions: true });
    },
  };
}
