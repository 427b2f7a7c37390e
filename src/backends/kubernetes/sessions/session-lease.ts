/**
 * A session's Lease (coordination.k8s.io/v1; same name and namespace as its Sandbox, owned by it):
 * who is attached to the pod's stdin (holderIdentity), the session's last activity through sandpit
 * (renewTime, which the operator reads for the idle timeout), and the runner's channel key (an
 * annotation). One gateway replica at a time holds it: two writers on one stdin would interleave.
 *
 * The holder writes renewTime at most every ACTIVITY_WRITE_SECONDS, on the trailing edge of
 * activity, and keeps doing so while operations are in flight (so a held Lease is always live).
 * Idle, it releases the Lease (holderIdentity cleared, in the same write as the last activity).
 * Another replica takes a released Lease at once, or a held one whose renewTime +
 * leaseDurationSeconds has passed (its holder died); every write is resourceVersion-guarded.
 */
import { ACTIVITY_WRITE_SECONDS, SANDBOX } from '../../../api/v1alpha1/sandbox.js';
import {
  ANNOTATION_CHANNEL_KEY,
  ANNOTATION_LAST_HOLDER,
  LABEL_SESSION,
  labelValueFor,
} from '../../../api/v1alpha1/labels.js';
import type { KubeClient } from '../../../kube/client.js';
import { isConflict } from '../../../kube/errors.js';
import { microTime, type Lease } from '../../../kube/objects.js';
import type { Logger } from '../../../observability/logger.js';
import { KEY_BYTES } from '../../../runner/session-protocol.js';
import { sleep } from '../../../shared/abort.js';
import { AppError } from '../../../shared/errors.js';

/** How long after its renewTime another replica may take a held Lease (its holder is presumed dead). */
export const LEASE_DURATION_SECONDS = 3 * ACTIVITY_WRITE_SECONDS;

export interface NewLease {
  namespace: string;
  /** The Sandbox's name (the session id). */
  name: string;
  sandboxUid: string;
  holder: string;
  key: Buffer;
  now: number;
}

export function buildSessionLease(l: NewLease): Lease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: l.name,
      namespace: l.namespace,
      labels: { [LABEL_SESSION]: labelValueFor(l.name) },
      annotations: { [ANNOTATION_CHANNEL_KEY]: l.key.toString('hex'), [ANNOTATION_LAST_HOLDER]: l.holder },
      ownerReferences: [
        { apiVersion: SANDBOX.apiVersion, kind: SANDBOX.kind, name: l.name, uid: l.sandboxUid },
      ],
    },
    spec: {
      holderIdentity: l.holder,
      leaseDurationSeconds: LEASE_DURATION_SECONDS,
      acquireTime: microTime(l.now),
      renewTime: microTime(l.now),
      leaseTransitions: 0,
    },
  };
}

/** Who holds the Lease now: undefined when nobody does (released, or its holder's time ran out). Pure. */
export function liveHolder(lease: Lease, now: number): string | undefined {
  const holder = lease.spec?.holderIdentity;
  if (!holder) return undefined;
  const renewed = Date.parse(lease.spec?.renewTime ?? '');
  const duration = (lease.spec?.leaseDurationSeconds ?? LEASE_DURATION_SECONDS) * 1000;
  return Number.isFinite(renewed) && renewed + duration > now ? holder : undefined;
}

/** The Lease as `holder` takes it over (or keeps it). Pure. */
export function takenBy(lease: Lease, holder: string, now: number): Lease {
  const spec = lease.spec ?? {};
  const keeping = spec.holderIdentity === holder;
  return {
    ...lease,
    metadata: {
      ...lease.metadata,
      annotations: { ...lease.metadata?.annotations, [ANNOTATION_LAST_HOLDER]: holder },
    },
    spec: {
      ...spec,
      holderIdentity: holder,
      leaseDurationSeconds: LEASE_DURATION_SECONDS,
      acquireTime: keeping && spec.acquireTime ? spec.acquireTime : microTime(now),
      renewTime: microTime(now),
      leaseTransitions: (spec.leaseTransitions ?? 0) + (keeping ? 0 : 1),
    },
  };
}

/** The replica that held the session last (holding it now, or the last before it let go). Pure. */
export function lastHolderOf(lease: Lease): string | undefined {
  return lease.spec?.holderIdentity || lease.metadata?.annotations?.[ANNOTATION_LAST_HOLDER] || undefined;
}

/** The runner's channel key the Lease carries. */
export function channelKeyOf(lease: Lease): Buffer {
  const key = Buffer.from(lease.metadata?.annotations?.[ANNOTATION_CHANNEL_KEY] ?? '', 'hex');
  if (key.length !== KEY_BYTES)
    throw new AppError('BACKEND_ERROR', `Lease ${lease.metadata?.name} has no channel key annotation`);
  return key;
}

export type LeaseApi = Pick<KubeClient, 'getLease' | 'createLease' | 'replaceLease'>;

export interface TakeOptions {
  namespace: string;
  name: string;
  holder: string;
  /** How long to wait for a live holder to release it before failing BUSY. */
  waitMs: number;
  /** How often to look again meanwhile. */
  pollMs?: number;
}

/** A session Lease this replica holds, and the activity it writes. */
export class SessionLease {
  private lease: Lease;
  private readonly kube: LeaseApi;
  private readonly holder: string;
  private readonly logger: Logger | undefined;
  private lastActivity: number;
  private lastWrite: number;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Called once if another replica took the Lease from under this one. */
  onLost: (holder: string) => void = () => {};
  /** Whether operations are in flight: while they are, the Lease is renewed every period. */
  isBusy: () => boolean = () => false;

  private constructor(kube: LeaseApi, lease: Lease, holder: string, logger?: Logger) {
    this.kube = kube;
    this.lease = lease;
    this.holder = holder;
    this.logger = logger;
    this.lastActivity = this.lastWrite = Date.now();
  }

  static async create(kube: LeaseApi, l: NewLease, logger?: Logger): Promise<SessionLease> {
    const lease = await kube.createLease(l.namespace, buildSessionLease(l));
    return new SessionLease(kube, lease, l.holder, logger);
  }

  /** Takes the session's Lease: at once when released or expired, else after its holder lets go; BUSY after waitMs. */
  static async take(kube: LeaseApi, o: TakeOptions, logger?: Logger): Promise<SessionLease> {
    const until = Date.now() + o.waitMs;
    for (;;) {
      const lease = await kube.getLease(o.namespace, o.name);
      if (!lease)
        throw new AppError('NOT_FOUND', `session ${o.name} has no Lease in namespace ${o.namespace}`);
      const now = Date.now();
      const holder = liveHolder(lease, now);
      if (holder === undefined || holder === o.holder) {
        try {
          const taken = await kube.replaceLease(o.namespace, takenBy(lease, o.holder, now));
          return new SessionLease(kube, taken, o.holder, logger);
        } catch (e) {
          if (!isConflict(e)) throw e;
          continue; // someone wrote it meanwhile: look again
        }
      }
      if (Date.now() >= until) {
        throw new AppError(
          'BUSY',
          `busy, retry later: session ${o.name} is attached to gateway replica ${holder}`,
          { hint: 'the replica lets go of it a few seconds after its last request; retry then' },
        );
      }
      await sleep(Math.min(o.pollMs ?? 200, Math.max(0, until - Date.now())));
    }
  }

  get channelKey(): Buffer {
    return channelKeyOf(this.lease);
  }

  /** Activity: written at most every ACTIVITY_WRITE_SECONDS, on the trailing edge. */
  touch(): void {
    this.lastActivity = Date.now();
    if (this.timer || this.stopped) return;
    const delay = Math.max(0, this.lastWrite + ACTIVITY_WRITE_SECONDS * 1000 - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // The period runs from when a write is sent: a touch while it is in flight waits a whole period.
      this.lastWrite = Date.now();
      void this.write(this.holder);
    }, delay);
    this.timer.unref();
  }

  /** Lets go: the last activity and a cleared holder, in one write; no more writes after it. */
  async release(): Promise<void> {
    if (this.stopped) return this.writing;
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.write('');
  }

  /** Stops writing without a last write (the Sandbox is being deleted, or another replica has it). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private write(holder: string): Promise<void> {
    this.writing = this.writing.then(() => this.writeOnce(holder));
    return this.writing;
  }

  private async writeOnce(holder: string): Promise<void> {
    const activity = this.lastActivity;
    for (let attempt = 0; attempt < 3; attempt++) {
      const spec = this.lease.spec ?? {};
      const next: Lease = {
        ...this.lease,
        spec: { ...spec, holderIdentity: holder, renewTime: microTime(activity) },
      };
      try {
        this.lease = await this.kube.replaceLease(this.ref.namespace, next);
        // Operations still running keep the Lease live: the next write comes one period on.
        if (holder && this.isBusy()) this.touch();
        return;
      } catch (e) {
        if (!isConflict(e)) {
          this.logger?.warn({ lease: this.ref.name, err: (e as Error).message }, 'Lease write failed');
          if (holder) this.touch();
          return;
        }
        if (!(await this.stillMine(holder))) return;
      }
    }
  }

  /** After a conflict: reads the Lease again; false (and onLost) when another replica has it now. */
  private async stillMine(writing: string): Promise<boolean> {
    const fresh = await this.kube.getLease(this.ref.namespace, this.ref.name).catch(() => undefined);
    const now = fresh?.spec?.holderIdentity ?? '';
    if (fresh && (now === this.holder || (!now && !writing))) {
      this.lease = fresh;
      return true;
    }
    this.stop();
    this.onLost(now || '(nobody)');
    return false;
  }

  private get ref(): { namespace: string; name: string } {
    return { namespace: this.lease.metadata?.namespace ?? '', name: this.lease.metadata?.name ?? '' };
  }
}
