/**
 * The operator's Prometheus metrics, in their own registry, with labels from closed sets only
 * (result, phase, reason, resource): never run names, UIDs or images. Pool metrics carry the
 * pool's namespace and name: pools are few and made by their admins, not one per run.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { PHASES } from '../api/run.js';
import { SESSION_STATES } from '../api/session.js';
import { createRegistry } from '../observability/metrics.js';

const POOL_POD_STATES = ['ready', 'starting', 'claimed'] as const;

/** One pool's pods, as sandpit_pool_pods reports them (labels: the pool's namespace and name). */
export interface PoolPodCount {
  namespace: string;
  pool: string;
  counts: Record<(typeof POOL_POD_STATES)[number], number>;
}

const LATENCY_BUCKETS = [0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 300];

export function createOperatorMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = createRegistry('operator', options);
  const registers = [registry];
  let phaseCounts: () => Map<string, number> = () => new Map();
  let sandboxPhaseCounts: () => Map<string, number> = () => new Map();
  let queueDepth: () => number = () => 0;
  let poolPods: () => PoolPodCount[] = () => [];
  const metrics = {
    registry,
    reconcileDuration: new Histogram({
      name: 'sandpit_operator_reconcile_duration_seconds',
      help: 'Time spent in one reconcile pass, by kind and result',
      labelNames: ['kind', 'result'] as const,
      buckets: [0.001, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
      registers,
    }),
    reconciles: new Counter({
      name: 'sandpit_operator_reconciles_total',
      help: 'Reconcile passes by kind and result: success, requeue, conflict or error',
      labelNames: ['kind', 'result'] as const,
      registers,
    }),
    runs: new Gauge({
      name: 'sandpit_operator_runs',
      help: 'SandboxRuns in the watched namespaces, by phase',
      labelNames: ['phase'] as const,
      registers,
      collect() {
        const counts = phaseCounts();
        for (const phase of ['', ...PHASES]) this.set({ phase: phase || 'New' }, counts.get(phase) ?? 0);
      },
    }),
    runsFinished: new Counter({
      name: 'sandpit_runs_total',
      help: 'Finished runs by backend, phase and reason',
      labelNames: ['backend', 'phase', 'reason'] as const,
      registers,
    }),
    timeToRunning: new Histogram({
      name: 'sandpit_operator_run_start_seconds',
      help: 'Time from the creation of a SandboxRun to its program running',
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    poolClaims: new Counter({
      name: 'sandpit_pool_claims_total',
      help: 'Claims of a pool pod for a SandboxRun, by result: warm (claimed), empty (no ready pod of its shape), conflict (the pod was taken or went first), error',
      labelNames: ['result'] as const,
      registers,
    }),
    runAcquire: new Histogram({
      name: 'sandpit_run_acquire_seconds',
      help: 'Time from the operator first seeing a SandboxRun to its job written to a pool pod (warm) or its pod created (cold)',
      labelNames: ['path'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
      registers,
    }),
    timeToFinish: new Histogram({
      name: 'sandpit_operator_run_finish_seconds',
      help: 'Time from the creation of a SandboxRun to its terminal phase, by phase',
      labelNames: ['phase'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    sandboxes: new Gauge({
      name: 'sandpit_operator_sandboxes',
      help: 'Sandboxes (sessions) in the watched namespaces, by phase',
      labelNames: ['phase'] as const,
      registers,
      collect() {
        const counts = sandboxPhaseCounts();
        for (const phase of ['', ...SESSION_STATES])
          this.set({ phase: phase || 'New' }, counts.get(phase) ?? 0);
      },
    }),
    sandboxReady: new Histogram({
      name: 'sandpit_operator_sandbox_ready_seconds',
      help: 'Time from the creation of a Sandbox to its session being ready',
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    sandboxesEnded: new Counter({
      name: 'sandpit_operator_sandboxes_ended_total',
      help: 'Sandboxes that ended, by phase (Expired, Deleted, Failed) and reason',
      labelNames: ['phase', 'reason'] as const,
      registers,
    }),
    leader: new Gauge({
      name: 'sandpit_operator_leader',
      help: '1 while this replica holds the leader lease',
      registers,
    }),
    watchRestarts: new Counter({
      name: 'sandpit_operator_watch_restarts_total',
      help: 'Watches re-opened, by resource and reason (closed, expired = 410, error, stalled)',
      labelNames: ['resource', 'reason'] as const,
      registers,
    }),
    queueDepth: new Gauge({
      name: 'sandpit_operator_workqueue_depth',
      help: 'Keys waiting in the work queue',
      registers,
      collect() {
        this.set(queueDepth());
      },
    }),
    poolPods: new Gauge({
      name: 'sandpit_pool_pods',
      help: 'Pods of each SandboxPool, by state: ready, starting (unclaimed) and claimed (serving, or ending)',
      labelNames: ['namespace', 'pool', 'state'] as const,
      registers,
      collect() {
        this.reset();
        for (const p of poolPods()) {
          for (const state of POOL_POD_STATES)
            this.set({ namespace: p.namespace, pool: p.pool, state }, p.counts[state]);
        }
      },
    }),
    poolRefill: new Histogram({
      name: 'sandpit_pool_refill_seconds',
      help: 'Time from the creation of a pool pod to its being ready',
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    /** Wires sandpit_pool_pods, read at scrape time: each pool's counts (one entry per pool). */
    observePoolPods(counts: () => PoolPodCount[]): void {
      poolPods = counts;
    },
    /** Wires sandpit_operator_runs, read at scrape time: SandboxRuns by phase ('' when new). */
    observeRunPhases(counts: () => Map<string, number>): void {
      phaseCounts = counts;
    },
    /** Wires sandpit_operator_sandboxes, read at scrape time: Sandboxes by phase ('' when new). */
    observeSandboxPhases(counts: () => Map<string, number>): void {
      sandboxPhaseCounts = counts;
    },
    /** Wires sandpit_operator_workqueue_depth, read at scrape time. */
    observeQueueDepth(depth: () => number): void {
      queueDepth = depth;
    },
  };
  return metrics;
}

export type OperatorMetrics = ReturnType<typeof createOperatorMetrics>;

/** Objects by their status's phase ('' when they have none yet), for the by-phase gauges. */
export function countPhases(
  objects: readonly { status?: { phase?: string } | undefined }[],
): Map<string, number> {
  const counts = new Map<string, number>();
  for (const o of objects) {
    const phase = o.status?.phase ?? '';
    counts.set(phase, (counts.get(phase) ?? 0) + 1);
  }
  return counts;
}
