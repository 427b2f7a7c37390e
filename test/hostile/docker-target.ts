/**
 * Hostile targets on the Docker backend: one DockerBackend per pool setting (cold: none; warm:
 * pools of one ready container for the shapes the configurations ask for), each under one service
 * that allows runc and runsc.
 */
import type Docker from 'dockerode';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { DEFAULT_POOL_OPTIONS } from '../../src/backends/docker/pool/pool-options.js';
import { sessionShape } from '../../src/backends/docker/session/docker-sessions.js';
import type { SandpitService } from '../../src/gateway/service.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { CountingBackend, createService } from '../contract/target.js';
import { requireDocker, sandpitContainers, specWith } from '../support/docker.js';
import { sessionContainers, sessionSpec } from '../support/sessions.js';
import { hostilePolicy, serviceTarget } from './service-target.js';
import type { HostileConfig, Targets, Untrusted } from './untrusted.js';

const RUNSC = 'runsc';

interface Host {
  backend: DockerBackend;
  service: SandpitService;
  metrics: Metrics;
}

export function dockerTargets(): Targets {
  const policy = hostilePolicy(['runc', RUNSC]);
  const hosts = new Map<boolean, Promise<Host>>();
  let engine: Docker | undefined;

  const host = (warm: boolean): Promise<Host> => {
    let h = hosts.get(warm);
    if (!h) {
      h = (async () => {
        engine = await requireDocker();
        const metrics = createMetrics();
        const backend = new DockerBackend({
          docker: engine,
          metrics,
          ...(warm ? { pool: { ...DEFAULT_POOL_OPTIONS, minIdle: 1, maxSize: 2 } } : {}),
        });
        return { backend, metrics, service: createService(new CountingBackend(backend), policy, metrics) };
      })();
      hosts.set(warm, h);
    }
    return h;
  };

  return {
    async target(config: HostileConfig): Promise<Untrusted> {
      const { backend, service, metrics } = await host(config.warm);
      const docker = engine!;
      const runtime = config.gvisor ? { runtime: RUNSC } : {};
      let ready: (() => Promise<void>) | undefined;
      if (config.warm) {
        const pool = backend.pool;
        if (!pool) throw new Error('the warm Docker backend has no pool');
        if (config.path === 'run')
          pool.start([specWith({ template: 'python', code: '', ...runtime }, policy)]);
        else pool.start([], [sessionShape(sessionSpec({ template: 'python', ...runtime }, policy))]);
        ready = async () => {
          if (!(await pool.filled(60_000))) throw new Error('the warm pools did not fill within 60 s');
        };
        await ready();
      }
      return serviceTarget({
        config,
        service,
        metrics,
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
