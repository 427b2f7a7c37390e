/**
 * Label and annotation keys under `sandpit.dev/`, and the names both sides agree on: the
 * deterministic names of a run's children, and the sandbox pod's container. Label values are never
 * raw user text longer than a label allows: long names are hashed.
 */
import { createHash } from 'node:crypto';

export const LABEL_MANAGED_BY = 'sandpit.dev/managed-by';
export const MANAGED_BY_OPERATOR = 'sandpit-operator';
/** The run's name (or its hash when the name does not fit a label value). */
export const LABEL_RUN = 'sandpit.dev/run';
/** The run's UID: what the NetworkPolicy selects, so it matches exactly this run's pod. */
export const LABEL_RUN_UID = 'sandpit.dev/run-uid';
/** The Sandbox's name (hashed when it does not fit): on its pod, and on the session Lease the gateway keeps. */
export const LABEL_SESSION = 'sandpit.dev/session';
/** The Sandbox's UID: what its NetworkPolicy selects, so it matches exactly this session's pod. */
export const LABEL_SESSION_UID = 'sandpit.dev/session-uid';
/** On a pool's pods: the SandboxPool's name (hashed when it does not fit); kept on a claimed pod. */
export const LABEL_POOL = 'sandpit.dev/pool';
/** On a pool's pods: the SandboxPool's UID (what its /scale selector and its NetworkPolicy use). */
export const LABEL_POOL_UID = 'sandpit.dev/pool-uid';
/**
 * On a pool's pods: `idle` while the pool owns the pod, `claimed` once a run or a session does (the
 * claim changes it together with the owner reference, in one resourceVersion-guarded update).
 */
export const LABEL_POOL_POD = 'sandpit.dev/pool-pod';
export const POOL_POD_IDLE = 'idle';
/**
 * On a pool's pods: the hash of the pool's shape key (src/policy/shape.ts `poolKey`, mode
 * included). A run or a session is served by an idle, ready pod whose label equals its own shape's.
 */
export const LABEL_POOL_SHAPE = 'sandpit.dev/pool-shape';
export const POOL_POD_CLAIMED = 'claimed';
/**
 * The namespace-wide deny-all NetworkPolicy (ingress and egress) that selects every sandbox pod by
 * LABEL_MANAGED_BY, so that a pod whose labels change at a claim is never selected by no policy at
 * all. Per-run and per-session policies only add to it.
 */
export const NAMESPACE_DENY_ALL_POLICY = 'sandpit-deny-all';
export const LABEL_COMPONENT = 'sandpit.dev/component';
/** Who asked for the run (set by the gateway); the audit record's principal. */
export const ANNOTATION_PRINCIPAL = 'sandpit.dev/principal';
/**
 * The owner's principal id (set by the gateway): every gateway replica answers only the owner, and
 * a run of anyone else is "not found". The name alone would not do: ownership is by token.
 */
export const ANNOTATION_OWNER = 'sandpit.dev/owner';
/**
 * On a run asked for under an idempotency key (its name derived from the owner and the key, set by
 * the gateway): the sha256 of the request, so that a repeat of the key with another request is
 * refused as a conflict rather than answered with this run.
 */
export const ANNOTATION_REQUEST_DIGEST = 'sandpit.dev/request-digest';

/** The container in every sandbox pod that runs the untrusted program (the one whose log is the output). */
export const SANDBOX_CONTAINER = 'sandbox';

export function shortHash(text: string, length = 10): string {
  return createHash('sha256').update(text).digest('hex').slice(0, length);
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** A label value for a name: the name itself when it fits (≤ 63, label syntax), else `h-<hash>`. */
/** The LABEL_POOL_SHAPE value of a shape key. */
export const shapeLabelValue = (shapeKey: string): string => shortHash(shapeKey, 32);

export function labelValueFor(name: string): string {
  return name.length <= 63 && LABEL_VALUE.test(name) ? name : `h-${shortHash(name, 20)}`;
}

/**
 * The name shared by a run's Pod, ConfigMap and NetworkPolicy: the run's name (cut to fit) and five
 * hex digits of its UID. Deterministic, so a restarted controller finds what it made, and distinct
 * for a re-created run of the same name whose old pod may still be terminating.
 */
export function childName(runName: string, uid: string): string {
  const base = runName.slice(0, 57).replace(/[-.]+$/, '');
  return `${base}-${shortHash(uid, 5)}`;
}

/**
 * On a Sandbox: the session as the gateway made it (JSON: its limits and lifetimes, the names of
 * its variables, never a value), so that any replica lists it without attaching.
 */
export const ANNOTATION_SESSION_FACTS = 'sandpit.dev/session-facts';

/** On a session's Lease only: the runner's channel key (hex), so another gateway can re-attach. */
export const ANNOTATION_CHANNEL_KEY = 'sandpit.dev/channel-key';

/**
 * On a session's Lease only: the replica that took it last, kept when it lets go (holderIdentity
 * is cleared then). That replica alone audits an end the Sandbox records (TTL, idle, a crash).
 */
export const ANNOTATION_LAST_HOLDER = 'sandpit.dev/last-holder';

/** On a claimed pool pod: when its claim was made (RFC 3339), which its pool's refill waits on. */
export const ANNOTATION_CLAIMED_AT = 'sandpit.dev/claimed-at';
