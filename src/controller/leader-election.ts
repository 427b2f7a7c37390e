/**
 * Lease-based leader election (coordination.k8s.io/v1), as client-go does it: a replica acts only
 * while it holds the Lease; it renews every retry period; another replica takes the Lease over only
 * after it has watched the record stay unchanged for a whole lease duration (by its own clock, so
 * clock skew between nodes does not matter). A leader that cannot renew within the renew deadline
 * stops leading. On a clean shutdown the leader releases the Lease so the next one starts at once.
 */
import { microTime, type Lease } from '../kube/objects.js';

export { microTime };
import type { KubeClient } from '../kube/client.js';
import { isAlreadyExists, isConflict } from '../kube/errors.js';
import type { Logger } from '../observability/logger.js';
import { sleep } from '../shared/abort.js';
import { within } from '../shared/time.js';

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
}

export interface LeaseRecord {
  holder: string;
  leaseDurationSeconds: number;
  acquireTime: string | undefined;
  renewTime: string | undefined;
  transitions: number;
}

export interface Observation {
  record: LeaseRecord;
  /** Local time (ms) when this record was first seen. */
  observedAt: number;
}

export function leaseRecord(lease: Lease): LeaseRecord {
  const s = lease.spec ?? {};
  return {
    holder: s.holderIdentity ?? '',
    leaseDurationSeconds: s.leaseDurationSeconds ?? 0,
    acquireTime: s.acquireTime || undefined,
    renewTime: s.renewTime || undefined,
    transitions: s.leaseTransitions ?? 0,
  };
}

const sameRecord = (a: LeaseRecord, b: LeaseRecord): boolean =>
  a.holder === b.holder &&
  a.renewTime === b.renewTime &&
  a.acquireTime === b.acquireTime &&
  a.transitions === b.transitions;

/** Keeps the first-seen time while the record stays the same. Pure. */
export function observe(previous: Observation | undefined, record: LeaseRecord, now: number): Observation {
  return previous && sameRecord(previous.record, record) ? previous : { record, observedAt: now };
}

/** May `identity` take (or keep) the lease? Pure. */
export function canAcquire(identity: string, observed: Observation, now: number): boolean {
  const r = observed.record;
  if (r.holder === '' || r.holder === identity) return true;
  return observed.observedAt + r.leaseDurationSeconds * 1000 <= now;
}

/** The record after `identity` takes or renews the lease. Pure. */
export function nextRecord(
  identity: string,
  current: LeaseRecord,
  leaseDurationSeconds: number,
  now: number,
): LeaseRecord {
  const keeping = current.holder === identity;
  return {
    holder: identity,
    leaseDurationSeconds,
    acquireTime: keeping ? current.acquireTime : microTime(now),
    renewTime: microTime(now),
    transitions: keeping || current.holder === '' ? current.transitions : current.transitions + 1,
  };
}

function toSpec(r: LeaseRecord): Lease['spec'] {
  return {
    holderIdentity: r.holder,
    leaseDurationSeconds: r.leaseDurationSeconds,
    leaseTransitions: r.transitions,
    ...(r.acquireTime ? { acquireTime: r.acquireTime } : {}),
    ...(r.renewTime ? { renewTime: r.renewTime } : {}),
  };
}

export interface LeaderCallbacks {
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

export class LeaderElector {
  private readonly kube: KubeClient;
  private readonly logger: Logger;
  private readonly options: LeaderElectionOptions;
  private observed: Observation | undefined;
  private leading = false;
  private lastRenew = 0;

  constructor(deps: { kube: KubeClient; logger: Logger }, options: LeaderElectionOptions) {
    this.kube = deps.kube;
    this.logger = deps.logger;
    this.options = options;
  }

  isLeader(): boolean {
    return this.leading;
  }

  /**
   * Campaigns and renews until `signal` aborts. Leadership can come and go: a leader that cannot
   * renew within the renew deadline (say, the apiserver is down) stops leading and campaigns again.
   */
  async run(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<void> {
    const { retryPeriodSeconds, renewDeadlineSeconds } = this.options;
    while (!signal.aborted) {
      const ok = await this.attempt(renewDeadlineSeconds * 1000);
      const now = Date.now();
      if (signal.aborted) break;
      if (ok) {
        this.lastRenew = now;
        if (!this.leading) {
          this.leading = true;
          this.logger.info({ lease: this.leaseName(), identity: this.options.identity }, 'Acquired Lease');
          callbacks.onStartedLeading();
        }
      } else if (this.leading && now - this.lastRenew > renewDeadlineSeconds * 1000) {
        this.leading = false;
        this.logger.error(
          { lease: this.leaseName() },
          'Lost Lease: could not renew it within the renew deadline',
        );
        callbacks.onStoppedLeading();
      }
      const jitter = this.leading ? 1 : 1 + Math.random() * 0.2;
      await sleep(retryPeriodSeconds * 1000 * jitter, signal).catch(() => undefined);
    }
  }

  /** One try, bounded in time: a request that hangs counts as a failed renewal. */
  private async attempt(timeoutMs: number): Promise<boolean> {
    return (await within(this.tryAcquireOrRenew(), timeoutMs)) ?? false;
  }

  /** Gives the lease up (a clean shutdown): the next replica takes it without waiting it out. */
  async release(): Promise<void> {
    if (!this.leading) return;
    this.leading = false;
    try {
      const lease = await this.kube.getLease(this.options.namespace, this.options.name);
      if (!lease || leaseRecord(lease).holder !== this.options.identity) return;
      const now = Date.now();
      await this.kube.replaceLease(this.options.namespace, {
        ...lease,
        spec: toSpec({
          ...leaseRecord(lease),
          holder: '',
          leaseDurationSeconds: 1,
          renewTime: microTime(now),
        }),
      });
      this.logger.info({ lease: this.leaseName() }, 'Released Lease');
    } catch (e) {
      this.logger.warn({ lease: this.leaseName(), err: (e as Error).message }, 'Could not release Lease');
    }
  }

  private leaseName(): string {
    return `${this.options.namespace}/${this.options.name}`;
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity, leaseDurationSeconds } = this.options;
    const now = Date.now();
    let lease: Lease | undefined;
    try {
      lease = await this.kube.getLease(namespace, name);
    } catch (e) {
      return this.failed(e);
    }
    if (!lease) return this.create(now);
    const current = leaseRecord(lease);
    this.observed = observe(this.observed, current, now);
    if (!canAcquire(identity, this.observed, now)) return false;
    const record = nextRecord(identity, current, leaseDurationSeconds, now);
    try {
      await this.kube.replaceLease(namespace, { ...lease, spec: toSpec(record) });
      this.observed = { record, observedAt: now };
      return true;
    } catch (e) {
      return isConflict(e) ? false : this.failed(e);
    }
  }

  /** No Lease yet: make it, held by this replica. */
  private async create(now: number): Promise<boolean> {
    const { namespace, name, identity, leaseDurationSeconds } = this.options;
    const record = nextRecord(
      identity,
      { holder: '', leaseDurationSeconds, acquireTime: undefined, renewTime: undefined, transitions: 0 },
      leaseDurationSeconds,
      now,
    );
    try {
      await this.kube.createLease(namespace, { metadata: { name, namespace }, spec: toSpec(record) });
      this.observed = { record, observedAt: now };
      return true;
    } catch (err) {
      return isAlreadyExists(err) ? false : this.failed(err);
    }
  }

  private failed(e: unknown): false {
    this.logger.warn({ lease: this.leaseName(), err: (e as Error).message }, 'Lease update failed');
    return false;
  }
}
