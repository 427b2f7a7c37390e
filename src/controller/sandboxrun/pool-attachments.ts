/**
 * The attaches the leader holds to idle pool pods of mode run, made as soon as each pod is ready,
 * so that a claim writes its job at once instead of opening pods/attach on the run's path (the
 * attach's set-up through the apiserver and the kubelet costs about as much as the job itself).
 *
 * A pool pod's stdin is `stdinOnce`: it closes when an attach ends. So an attach held here and
 * closed before a job (this operator stops or loses the Lease, the apiserver drops the stream, the
 * pod is no longer idle) ends the pod's runner with "no job arrived", and the pool replaces the
 * pod; an attach that ends after the job changes nothing (the runner has its whole job). The
 * runner's 10 s clock starts at the job's first byte, not at the attach.
 *
 * Only pods a SandboxPool controls are attached to (isIdlePoolPod), and a held attach passes to
 * exactly one claim: reserve() gives the pod to one claim of this operator before its update,
 * take() hands the attach to the serve once the update won, release() frees the pod when it lost.
 */
import { SANDBOX_CONTAINER } from '../../api/v1alpha1/labels.js';
import type { KubeClient } from '../../kube/client.js';
import type { AttachedPod } from '../../kube/attach.js';
import type { Pod } from '../../kube/objects.js';
import type { Logger } from '../../observability/logger.js';
import { isIdlePoolPod } from '../pod/claim-pool-pod.js';
import { POOL_RUNNER_COMMAND } from '../sandboxpool/build-pool-pod.js';

type Sink = (data: Buffer) => void;

/** An attach taken by a claim: its output goes where the serve routes it from now on. */
export interface HeldAttach {
  /**
   * The attach, once open: a claim may take one still opening, which the serve then waits for
   * rather than set up a second attach to the same pod. Undefined: it failed.
   */
  readonly opened: Promise<AttachedPod | undefined>;
  route(onStdout: Sink, onStderr: Sink): void;
}

interface Entry {
  uid: string;
  /** Settles with the attach once it is open (undefined: it failed). */
  opening: Promise<AttachedPod | undefined>;
  attached: AttachedPod | undefined;
  /** A claim took it: the serve that has it closes it. */
  taken: boolean;
  stdout: Sink;
  stderr: Sink;
}

/** A pool pod of mode run: its container runs the runner's pool mode. Pure. */
export function isRunPoolPod(pod: Pod): boolean {
  const command = pod.spec?.containers?.find((c) => c.name === SANDBOX_CONTAINER)?.command ?? [];
  return POOL_RUNNER_COMMAND.every((c, i) => command[i] === c);
}

const drop: Sink = () => undefined;

/** How often a held attach is pinged: well under the idle limits of common proxies (60 s and more). */
const HELD_PING_MS = 30_000;

export class PoolAttachments {
  private readonly kube: Pick<KubeClient, 'attach'>;
  private readonly logger: Logger;
  /** By pod UID. */
  private readonly entries = new Map<string, Entry>();
  /** Pods whose held attach ended: their stdin is closed, so they are never attached to again. */
  private readonly spent = new Set<string>();
  /** Pods a claim of this operator is trying now (by UID). */
  private readonly claiming = new Set<string>();
  private active = false;

  constructor(deps: { kube: Pick<KubeClient, 'attach'>; logger: Logger }) {
    this.kube = deps.kube;
    this.logger = deps.logger;
  }

  /** Sees a pod change: attaches to an idle run pool pod, lets go of one that is no longer idle. */
  observe(type: 'add' | 'update' | 'delete', pod: Pod): void {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    if (type === 'delete') this.spent.delete(uid);
    const entry = this.entries.get(uid);
    const wanted =
      type !== 'delete' && this.active && !this.spent.has(uid) && isIdlePoolPod(pod) && isRunPoolPod(pod);
    if (wanted && !entry) this.open(pod, uid);
    // A pod a claim is trying: the claim's outcome decides.
    else if (!wanted && entry && !this.claiming.has(uid)) this.close(entry);
  }

  /**
   * Leading (with the pods the cache holds now), or not: while not leading nothing is held, and
   * every idle attach closes (its pod is replaced).
   */
  setActive(active: boolean, pods: readonly Pod[] = []): void {
    this.active = active;
    if (active) for (const pod of pods) this.observe('update', pod);
    else for (const entry of [...this.entries.values()]) if (!this.claiming.has(entry.uid)) this.close(entry);
  }

  /** Whether an open attach to the pod is held and no claim has it. */
  holds(uid: string): boolean {
    const entry = this.entries.get(uid);
    return entry !== undefined && !this.claiming.has(uid) && entry.attached?.open === true;
  }

  /**
   * Takes the pod for one claim (its held attach too, if any), so that two passes of this
   * operator never try the same pod at once; false when another claim has it.
   */
  reserve(uid: string): boolean {
    if (this.claiming.has(uid)) return false;
    this.claiming.add(uid);
    return true;
  }

  /** The claim lost (or failed): the pod and its attach are free again. */
  release(uid: string): void {
    this.claiming.delete(uid);
  }

  /**
   * The claim won: the attach held to the pod, open or still opening, is the serve's from now on
   * (it closes it); undefined when none is (never made, or it ended).
   */
  take(uid: string): HeldAttach | undefined {
    this.claiming.delete(uid);
    const entry = this.entries.get(uid);
    if (!entry) return undefined;
    this.entries.delete(uid);
    if (entry.attached && !entry.attached.open) {
      entry.attached.close();
      return undefined;
    }
    entry.taken = true;
    return {
      opened: entry.opening,
      route: (onStdout, onStderr) => {
        entry.stdout = onStdout;
        entry.stderr = onStderr;
      },
    };
  }

  get size(): number {
    return this.entries.size;
  }

  private open(pod: Pod, uid: string): void {
    const namespace = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const entry: Entry = {
      uid,
      opening: Promise.resolve(undefined),
      attached: undefined,
      taken: false,
      stdout: drop,
      stderr: drop,
    };
    this.entries.set(uid, entry);
    entry.opening = this.kube
      .attach(
        { namespace, pod: name, container: SANDBOX_CONTAINER, keepAliveMs: HELD_PING_MS },
        (data) => entry.stdout(data),
        (data) => entry.stderr(data),
      )
      .then(
        (attached) => {
          entry.attached = attached;
          if (entry.taken) return attached;
          // Gone while it opened (the pod is no longer idle, or leadership was lost).
          if (this.entries.get(uid) !== entry) attached.close();
          else
            void attached.closed.then((why) => {
              this.spent.add(uid);
              if (this.entries.get(uid) !== entry) return;
              this.entries.delete(uid);
              this.logger.debug({ pod: `${namespace}/${name}`, why }, 'Held attach to a pool pod ended');
            });
          return attached;
        },
        (e: unknown) => {
          if (this.entries.get(uid) === entry) this.entries.delete(uid);
          this.logger.warn(
            { pod: `${namespace}/${name}`, err: (e as Error).message },
            'Could not attach ahead to a pool pod; a claim of it attaches then',
          );
          return undefined;
        },
      );
  }

  private close(entry: Entry): void {
    this.entries.delete(entry.uid);
    this.spent.add(entry.uid);
    entry.attached?.close();
  }
}
