/**
 * Hostile targets on the oci backend (runc and runsc driven directly; no pools, so every
 * configuration is cold): one OciBackend under one service that allows both runtimes.
 */
import { containerId } from '../../src/backends/oci/layout.js';
import type { OciBackend } from '../../src/backends/oci/oci-backend.js';
import type { SandpitService } from '../../src/gateway/service.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { CountingBackend, createService } from '../contract/target.js';
import { makeOciBackend, ociLeftovers } from '../support/oci.js';
import { hostilePolicy, serviceTarget } from './service-target.js';
import type { HostileConfig, Targets, Untrusted } from './untrusted.js';

const RUNSC = 'runsc';

export function ociTargets(): Targets {
  let host: Promise<{ backend: OciBackend; service: SandpitService; metrics: Metrics }> | undefined;
  return {
    async target(config: HostileConfig): Promise<Untrusted> {
      if (config.warm) throw new Error('the oci backend keeps no pools: no warm configuration');
      host ??= (async () => {
        const backend = await makeOciBackend();
        const metrics = createMetrics();
        const service = createService(new CountingBackend(backend), hostilePolicy(['runc', RUNSC]), metrics);
        return { backend, service, metrics };
      })();
      const { service, metrics } = await host;
      return serviceTarget({
        config,
        service,
        metrics,
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
