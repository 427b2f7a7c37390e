/**
 * reconcileSandbox(): one level-triggered, idempotent pass over one Sandbox, by key. It reads the
 * Sandbox from the cache, takes the shared policy's verdict on it, makes sure its NetworkPolicy,
 * Secret (with an egress allowlist) and Pod exist (session-children.ts, the shared ensureChildren()), reads the runner's ready frame at the start of the pod's
 * log once the pod is Ready, reads the session Lease's renewTime as the last activity, computes the status purely, writes it
 * once if it changed (PUT with the resourceVersion), reports the transition, and deletes the pod of
 * a session that ended, a pod that finished by itself too (nothing reads it after the end). It never writes the spec, never writes the Lease, and never touches
 * children it does not control.
 */
import { childName, SANDBOX_CONTAINER } from '../../api/v1alpha1/labels.js';
import {
  SANDBOX,
  SandboxStatusSchema,
  type Sandbox,
  type SandboxStatus,
} from '../../api/v1alpha1/sandbox.js';
import { isSessionEnded } from '../../api/session.js';
import type { Lease, Pod } from '../../kube/objects.js';
import { poolShapeLabel } from '../sandboxpool/evaluate-pool.js';
import type { EnvPair } from '../../policy/session.js';
import type { Store } from '../../kube/store.js';
import type { Policy } from '../../policy/policy.js';
import {
  MIN_SESSION_PROTOCOL_VERSION,
  READY_FRAME_BYTES,
  readyFrameVersion,
} from '../../runner/session-protocol.js';
import type { ObjectRef } from '../children.js';
import type { ReconcileResult } from '../kind-controller.js';
import {
  earliest,
  endedPass,
  specNumber,
  stopPod,
  writeStatus,
  type StatusWriteDeps,
  type StopDeps,
} from '../lifecycle.js';
import { CLAIM_GRACE_SECONDS, type ClaimRequest } from '../pod/claim-pool-pod.js';
import type { PodSettings } from '../pod/build-sandbox-pod.js';
import type { ClusterEgress } from '../pod/egress.js';
import {
  ensureChildren,
  NOTHING_OBSERVED,
  type ChildrenDeps,
  type PodObservation,
} from '../pod/ensure-children.js';
import type { StatusOverlay } from '../status-overlay.js';
import { buildSessionChildren } from './session-children.js';
import { computeSandboxStatus, sandboxRequeueMs } from './compute-status.js';
import { evaluateSandbox, type SandboxVerdict } from './evaluate-sandbox.js';
import { reportSandbox, type SandboxReportDeps } from './report.js';
import { sandboxRef, sessionChildMeta } from './sandbox-ref.js';

export interface SandboxSettings {
  policy: Policy;
  pod: PodSettings;
  /** A Sandbox whose spec names no pendingTimeoutSeconds waits this long for its pod to be ready. */
  defaultPendingTimeoutSeconds: number;
  /** The cluster enforces NetworkPolicy (declared in the config): without it the runner checks its interfaces. */
  networkPolicyEnforced: boolean;
  /** The egress proxy, when the cluster runs one: a session with an allowlist needs it. */
  egress?: ClusterEgress | undefined;
}

export interface SandboxReconcileDeps extends ChildrenDeps, SandboxReportDeps, StopDeps, StatusWriteDeps {
  sandboxes: Store<Sandbox>;
  leases: Store<Lease>;
  overlay: StatusOverlay;
  settings: SandboxSettings;
}

interface SandboxView {
  raw: Sandbox;
  ref: ObjectRef;
  key: string;
  generation: number;
  createdAt: string;
  status: SandboxStatus;
  timing: Parameters<typeof sandboxRequeueMs>[1];
}

function readSandbox(raw: Sandbox, key: string, deps: SandboxReconcileDeps): SandboxView {
  const m = raw.metadata ?? {};
  const parsed = SandboxStatusSchema.safeParse(raw.status ?? {});
  const createdAt = m.creationTimestamp ?? new Date(0).toISOString();
  return {
    raw,
    key,
    ref: sandboxRef({ name: m.name ?? '', namespace: m.namespace ?? '', uid: m.uid ?? '' }),
    generation: m.generation ?? 1,
    createdAt,
    status: parsed.success ? parsed.data : {},
    timing: {
      createdAt,
      pendingTimeoutSeconds:
        specNumber(raw.spec, 'pendingTimeoutSeconds') ?? deps.settings.defaultPendingTimeoutSeconds,
      idleTimeoutSeconds: specNumber(raw.spec, 'idleTimeoutSeconds'),
      ttlSecondsAfterFinished: specNumber(raw.spec, 'ttlSecondsAfterFinished'),
      now: deps.now().toISOString(),
    },
  };
}

export async function reconcileSandbox(deps: SandboxReconcileDeps, key: string): Promise<ReconcileResult> {
  const [namespace = '', name = ''] = key.split('/');
  const raw = deps.overlay.latest(key, deps.sandboxes.get(namespace, name));
  if (!raw || raw.metadata?.deletionTimestamp) return {}; // owner references garbage-collect the children
  const sandbox = readSandbox(raw, key, deps);
  if (sandbox.status.phase && isSessionEnded(sandbox.status.phase)) {
    return endedPass(deps, {
      kind: SANDBOX,
      key,
      ref: sandbox.ref,
      raw,
      generation: sandbox.generation,
      status: sandbox.status,
      endedAt: sandbox.status.finishedTime,
      ttlSecondsAfterFinished: sandbox.timing.ttlSecondsAfterFinished,
      now: sandbox.timing.now,
      finishedPod: 'delete',
    });
  }
  return liveSandbox(deps, sandbox);
}

/** The session's pod: the one observed, else the one recorded, else the one it would make. */
const podNameOf = (sandbox: SandboxView, observed: PodObservation): string =>
  observed.pod?.name ?? sandbox.status.podName ?? childName(sandbox.ref.name, sandbox.ref.uid);

/** A session not ended yet: the verdict, the children, the status, the report. */
async function liveSandbox(deps: SandboxReconcileDeps, sandbox: SandboxView): Promise<ReconcileResult> {
  const verdict = evaluateSandbox(sandbox.raw.spec, deps.settings.policy, deps.settings);
  const cancel = verdict.spec?.cancel === true;
  const observed =
    verdict.allowed && !cancel ? await observeChildren(deps, sandbox, verdict) : NOTHING_OBSERVED;
  const podName = podNameOf(sandbox, observed);
  const podReady = observed.pod?.phase === 'Running' && observed.pod.ready;
  const runnerAnswered =
    podReady && !sandbox.status.readyTime && (await runnerAnsweredIn(deps, sandbox.ref, podName));
  const status = computeSandboxStatus({
    generation: sandbox.generation,
    createdAt: sandbox.createdAt,
    current: sandbox.status,
    verdict: verdict.allowed ? { allowed: true } : { allowed: false, message: verdict.message },
    cancel,
    pendingTimeoutSeconds: sandbox.timing.pendingTimeoutSeconds,
    ttlSeconds: verdict.allowed ? verdict.effective.ttlSeconds : undefined,
    idleTimeoutSeconds: sandbox.timing.idleTimeoutSeconds,
    podName,
    ...observed,
    renewTime: renewTimeOf(deps.leases, sandbox.ref),
    runnerAnswered,
    now: sandbox.timing.now,
  });
  await writeStatus(deps, {
    kind: SANDBOX,
    key: sandbox.key,
    raw: sandbox.raw,
    before: sandbox.status,
    after: status,
  });
  reportSandbox(deps, {
    sandbox: sandbox.ref,
    createdAt: sandbox.createdAt,
    before: sandbox.status,
    after: status,
  });
  // Nothing is watched that shows the frame reaching the log: look again soon.
  const waitingForRunner = podReady && status.phase === 'Creating' ? RUNNER_POLL_MS : undefined;
  const after = earliest(sandboxRequeueMs(status, sandbox.timing), waitingForRunner);
  if (status.phase && isSessionEnded(status.phase))
    return { requeueAfterMs: earliest(after, await stopPod(deps, sandbox.ref, 'delete')) };
  return { requeueAfterMs: after };
}

function observeChildren(
  deps: SandboxReconcileDeps,
  sandbox: SandboxView,
  verdict: Extract<SandboxVerdict, { allowed: true }>,
): Promise<PodObservation> {
  const { ref } = sandbox;
  return ensureChildren(
    deps,
    { ...ref, podRecorded: sandbox.status.podName !== undefined, recordedPod: sandbox.status.podName },
    {
      ...buildSessionChildren(ref, verdict, {
        pod: deps.settings.pod,
        maxTtlSeconds: deps.settings.policy.sessions.maxTtlSeconds,
        egress: deps.settings.egress,
      }),
      claim: poolClaim(deps, ref, verdict),
    },
  );
}

/**
 * How a SandboxPool's ready pod may serve the session. Not at all with an allowlist: a pool's
 * pods have no proxy variables from the session's Secret in their env, nor a way to take them
 * later, so such a session always gets a pod of its own.
 */
function poolClaim(
  deps: SandboxReconcileDeps,
  ref: ObjectRef,
  verdict: Extract<SandboxVerdict, { allowed: true }>,
): ClaimRequest | undefined {
  if (verdict.effective.network.egress !== 'none') return undefined;
  return {
    owner: ref,
    ownerLabels: sessionChildMeta(ref).labels ?? {},
    shapeLabel: poolShapeLabel(verdict.effective, 'session'),
    // The backstop a session's own pod has: the TTL ceiling (an extension never passes it).
    remainingSeconds: deps.settings.policy.sessions.maxTtlSeconds + CLAIM_GRACE_SECONDS,
    // A pool's session pods carry the pool's variables (its template's): the session's must be those.
    fits: (pod) => sameEnv(sandboxContainer(pod)?.env ?? [], verdict.effective.env),
    countClaim: (result) => deps.metrics.poolClaims.inc({ result }),
    now: deps.now(),
  };
}

const sandboxContainer = (pod: Pod) => pod.spec?.containers.find((c) => c.name === SANDBOX_CONTAINER);

/** The same variables with the same values, in any order. Pure. */
function sameEnv(have: readonly { name: string; value?: string }[], want: readonly EnvPair[]): boolean {
  const norm = (env: readonly { name: string; value?: string }[]) =>
    JSON.stringify(env.map((e) => [e.name, e.value ?? '']).sort());
  return norm(have) === norm(want);
}

/** How often a Sandbox whose pod is Ready looks for its runner's ready frame in the pod's log. */
const RUNNER_POLL_MS = 250;

/** Whether the runner's ready frame opens the pod's log (it answered: it waits for a session). */
async function runnerAnsweredIn(
  deps: SandboxReconcileDeps,
  sandbox: ObjectRef,
  pod: string,
): Promise<boolean> {
  const head = await deps.kube
    .readPodLog(
      { namespace: sandbox.namespace, name: pod },
      { container: SANDBOX_CONTAINER, limitBytes: READY_FRAME_BYTES + 1 },
    )
    .catch(() => '');
  const version = readyFrameVersion(Buffer.from(head, 'latin1'));
  return version !== undefined && version >= MIN_SESSION_PROTOCOL_VERSION;
}

/** The session Lease's renewTime, when the Lease (same name) is owned by this very Sandbox. */
function renewTimeOf(leases: Store<Lease>, sandbox: ObjectRef): string | undefined {
  const lease = leases.get(sandbox.namespace, sandbox.name);
  if (!lease?.metadata?.ownerReferences?.some((o) => o.uid === sandbox.uid)) return undefined;
  const renewed = lease.spec?.renewTime;
  return renewed && !Number.isNaN(Date.parse(renewed)) ? renewed : undefined;
}
