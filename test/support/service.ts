/**
 * The gateway's use cases over a Docker backend, for the docker tier: a SandpitService on the
 * real engine (cold, or with warm pools when SANDPIT_TEST_POOL=on), with its own metrics and an
 * audit trail, in a file when given one. Its shutdown closes the backend and the trail.
 */
import type Docker from 'dockerode';
import type { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import type { Principal } from '../../src/gateway/principal.js';
import { SandpitService } from '../../src/gateway/service.js';
import type { SessionCaps } from '../../src/gateway/sessions.js';
import { createAuditTrail, type AuditTrail } from '../../src/observability/audit-trail.js';
import { silentLogger } from '../../src/observability/logger.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { createPolicy, type Policy } from '../../src/policy/policy.js';
import { makeBackend } from './docker.js';

export interface DockerService {
  service: SandpitService;
  backend: DockerBackend;
  metrics: Metrics;
  audit: AuditTrail;
}

export interface DockerServiceOptions {
  docker?: Docker;
  /** Where the audit trail goes (else only to the silent logger). */
  auditPath?: string;
  policy?: Policy;
  sessions?: Partial<SessionCaps>;
}

export async function dockerService(options: DockerServiceOptions = {}): Promise<DockerService> {
  const backend = await makeBackend(options.docker);
  const metrics = createMetrics();
  const audit = createAuditTrail({
    logger: silentLogger(),
    metrics: metrics.audit,
    ...(options.auditPath
      ? {
          file: {
            path: options.auditPath,
            maxBytes: 100 * 1024 ** 2,
            maxFiles: 5,
            flushIntervalMs: 100,
            retryIntervalMs: 100,
          },
        }
      : {}),
  });
  const service = new SandpitService({
    backend,
    policy: options.policy ?? createPolicy(),
    logger: silentLogger(),
    metrics,
    audit,
    slots: { maxConcurrent: 4, maxQueued: 16 },
    ...(options.sessions ? { sessions: options.sessions } : {}),
  });
  return { service, backend, metrics, audit };
}

/** A token's holder, as auth makes one: its id from the token, its name from the config. */
export function principal(name: string, maxSessions?: number): Principal {
  return {
    id: `token:${name}`,
    name,
    scope: {},
    ...(maxSessions !== undefined ? { maxSessions } : {}),
  };
}
