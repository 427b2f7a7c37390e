/**
 * Hostile targets on the Docker backend: one gateway per pool setting (cold: no pools; warm: pools
 * of one ready container for the shapes the configurations ask for), each wired as `sandpit serve`
 * wires it (test/hostile/gateway.ts), allowing runc and runsc.
 */
import type Docker from 'dockerode';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { sessionShape } from '../../src/backends/docker/session/docker-sessions.js';
import type { BackendWiring } from '../../src/cmd/wiring.js';
import { requireDocker, sandpitContainers, specWith } from '../support/docker.js';
import { sessionContainers, sessionSpec } from '../support/sessions.js';
import { GATEWAY_SECRETS, HOSTILE_SANDBOX_CONFIG, wireGateway } from './gateway.js';
import { serviceTarget } from './service-target.js';
import type { HostileConfig, Targets, Untrusted } from './untrusted.js';

const RUNSC = 'runsc';

export function dockerTargets(): Targets {
  const hosts = new Map<boolean, Promise<BackendWiring & { backend: DockerBackend }>>();

  const host = (warm: boolean) => {
    let h = hosts.get(warm);
    if (!h) {
      h = (async () => {
        await requireDocker();
        const wired = await wireGateway({
          sandbox: { backend: 'docker', ...HOSTILE_SANDBOX_CONFIG, allowedRuntimes: ['runc', RUNSC] },
          pool: warm ? { enabled: true, minIdle: 1, maxSize: 2 } : { enabled: false },
        });
        if (!(wired.backend instanceof DockerBackend)) throw new Error('the gateway did not wire Docker');
        return { ...wired, backend: wired.backend };
      })();
      hosts.set(warm, h);
    }
    return h;
  };

  return {
    async target(config: HostileConfig): Promise<Untrusted> {
      const { backend, service, metrics } = await host(config.warm);
      const docker: Docker = await requireDocker();
      const runtime = config.gvisor ? { runtime: RUNSC } : {};
      let ready: (() => Promise<void>) | undefined;
      if (config.warm) {
        const pool = backend.pool;
        if (!pool) throw new Error('the warm Docker gateway has no pool');
        if (config.path === 'run')
          pool.start([specWith({ template: 'python', code: '', ...runtime }, service.policy)]);
        else pool.start([], [sessionShape(sessionSpec({ template: 'python', ...runtime }, service.policy))]);
        ready = async () => {
          if (!(await pool.filled(60_000))) throw new Error('the warm pools did not fill within 60 s');
        };
        await ready();
      }
      return serviceTarget({
        config,
        service,
        metrics,
        secrets: GATEWAY_SECRETS,
        gvisorRuntime: RUNSC,
        ...(ready ? { ready } : {}),
        async leftovers(made) {
          const runs = await Promise.all(made.runs.map((id) => sandpitContainers(docker, id)));
          const sessions = await Promise.all(
            made.sessions.map(async (id) =>
              (await sessionContainers(docker, id)).map((c) => c.Names[0] ?? c.Id),
            ),
          );
          return [...runs.flat(), ...sessions.flat()];
        },
      });
    },
    async close() {
      await Promise.all(
        [...hosts.values()].map(async (h) => (await h).service.shutdown({ endSessions: true })),
      );
    },
  };
}
