/** Prometheus metrics with bounded labels only (never run IDs, tokens or images). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The audit trail's counters, in the registry of the process that writes it (gateway or operator). */
export function createAuditMetrics(registry: Registry) {
  const registers = [registry];
  return {
    records: new Counter({
      name: 'sandpit_audit_records_total',
      help: 'Audit records written: to the audit file once fsynced, or to the log when there is no file',
      registers,
    }),
    writeFailures: new Counter({
      name: 'sandpit_audit_write_failures_total',
      help: 'Failed attempts to write the audit file, by errno code (new runs are refused meanwhile)',
      labelNames: ['code'] as const,
      registers,
    }),
  };
}

export type AuditMetrics = ReturnType<typeof createAuditMetrics>;

/** The egress proxy's series, in the registry of the process that runs it (gateway or egress-proxy). */
export function createEgressMetrics(registry: Registry) {
  const registers = [registry];
  return {
    connections: new Counter({
      name: 'sandpit_egress_connections_total',
      help: 'Connections (and plain-HTTP requests) through the egress proxy, by decision and reason (allowlist when allowed)',
      labelNames: ['decision', 'reason'] as const,
      registers,
    }),
    bytes: new Counter({
      name: 'sandpit_egress_bytes_total',
      help: 'Bytes through the egress proxy, by direction (out: from sandboxes, in: to them)',
      labelNames: ['direction'] as const,
      registers,
    }),
    open: new Gauge({
      name: 'sandpit_egress_open_connections',
      help: 'Connections open through the egress proxy now',
      registers,
    }),
    connectDuration: new Histogram({
      name: 'sandpit_egress_connect_duration_seconds',
      help: 'Time to resolve and connect upstream, for allowed connections',
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
  };
}

export type EgressMetrics = ReturnType<typeof createEgressMetrics>;

export type Component = 'gateway' | 'operator' | 'egress-proxy';

/**
 * One process's registry. Every series carries `component`, so the gateway and the operator stay
 * apart on one dashboard. The default process and Node.js metrics keep their standard names
 * (`process_cpu_seconds_total`, `nodejs_heap_size_used_bytes`, …), which stock dashboards and alerts
 * expect; sandpit's own are prefixed `sandpit_`.
 */
export function createRegistry(component: Component, options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ component });
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });
  return registry;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = createRegistry('gateway', options);
  const registers = [registry];
  return {
    registry,
    audit: createAuditMetrics(registry),
    egress: createEgressMetrics(registry),
    runs: new Counter({
      name: 'sandpit_runs_total',
      help: 'Finished runs by backend, phase and reason',
      labelNames: ['backend', 'phase', 'reason'] as const,
      registers,
    }),
    runDuration: new Histogram({
      name: 'sandpit_run_duration_seconds',
      help: 'Wall-clock time of a run, from admission to result',
      labelNames: ['backend', 'served'] as const,
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
      registers,
    }),
    activeRuns: new Gauge({
      name: 'sandpit_active_runs',
      help: 'Runs currently executing',
      labelNames: ['backend'] as const,
      registers,
    }),
    queuedRuns: new Gauge({ name: 'sandpit_queued_runs', help: 'Runs waiting for a free slot', registers }),
    rejected: new Counter({
      name: 'sandpit_rejected_requests_total',
      help: 'Requests refused before any sandbox existed, by error code',
      labelNames: ['code'] as const,
      registers,
    }),
    poolContainers: new Gauge({
      name: 'sandpit_pool_containers',
      help: 'Warm pool containers by template and state (idle, starting)',
      labelNames: ['template', 'state'] as const,
      registers,
    }),
    poolClaims: new Counter({
      name: 'sandpit_pool_claims_total',
      help: 'Pool claims by template and result (hit: a warm container served the run; miss: cold start)',
      labelNames: ['template', 'result'] as const,
      registers,
    }),
    poolRefill: new Histogram({
      name: 'sandpit_pool_refill_seconds',
      help: 'Time to start a pool container until its runner reports ready',
      labelNames: ['template'] as const,
      buckets: [0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30],
      registers,
    }),
    sandboxAcquire: new Histogram({
      name: 'sandpit_sandbox_acquire_seconds',
      help: 'Time from a run starting to its sandbox being ready for the job, by path (warm claim or cold start)',
      labelNames: ['served'] as const,
      buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
      registers,
    }),
    liveSessions: new Gauge({
      name: 'sandpit_sessions',
      help: 'Sessions alive now (Creating or Ready)',
      labelNames: ['backend'] as const,
      registers,
    }),
    sessionsCreated: new Counter({
      name: 'sandpit_sessions_created_total',
      help: 'Sessions created, by backend and how (warm from a session pool, or cold)',
      labelNames: ['backend', 'served'] as const,
      registers,
    }),
    sessionsEnded: new Counter({
      name: 'sandpit_sessions_ended_total',
      help: 'Sessions ended, by final state and reason',
      labelNames: ['backend', 'state', 'reason'] as const,
      registers,
    }),
    execs: new Counter({
      name: 'sandpit_session_execs_total',
      help: 'Finished session execs by phase and reason',
      labelNames: ['backend', 'phase', 'reason'] as const,
      registers,
    }),
    execDuration: new Histogram({
      name: 'sandpit_session_exec_duration_seconds',
      help: 'Wall-clock time of a session exec, from its request to its result',
      labelNames: ['backend'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
      registers,
    }),
    fileBytes: new Counter({
      name: 'sandpit_session_file_bytes_total',
      help: 'Bytes of session files moved, by direction (in: written into a session; out: read or downloaded)',
      labelNames: ['direction'] as const,
      registers,
    }),
    httpRequests: new Counter({
      name: 'sandpit_http_requests_total',
      help: 'HTTP requests by route (the pattern, never the path) and status code',
      labelNames: ['method', 'route', 'status'] as const,
      registers,
    }),
    toolCalls: new Counter({
      name: 'sandpit_tool_calls_total',
      help: 'MCP tool calls by tool and outcome',
      labelNames: ['tool', 'outcome'] as const,
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
