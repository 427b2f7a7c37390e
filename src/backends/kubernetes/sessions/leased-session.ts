/**
 * A session on Kubernetes as one gateway replica serves it: a RunnerSession over the pod's attach
 * while this replica holds the session's Lease, and nothing while it does not. Every operation
 * first holds the session (takes the Lease, checks the pod is the Sandbox's, attaches, resyncs
 * with the runner), and counts as activity on the Lease. A short linger after the last operation
 * ends, the replica detaches and releases the Lease, so another replica can take it at once: the
 * session's state lives in the Sandbox, the Lease and the runner, never in one gateway's memory.
 */
import type { FileEntry, SessionReason } from '../../../api/session.js';
import { SANDBOX } from '../../../api/v1alpha1/sandbox.js';
import type { KubeClient } from '../../../kube/client.js';
import type { Logger } from '../../../observability/logger.js';
import type { EffectiveExec, EffectiveSessionSpec } from '../../../policy/session.js';
import type { ResyncInfo } from '../../../runner/session-protocol.js';
import { AppError } from '../../../shared/errors.js';
import { withTimeout } from '../../../shared/time.js';
import { RunnerSession } from '../../session-sandbox.js';
import type {
  ExecExecution,
  ExecOptions,
  FileChange,
  FileRead,
  FileWrite,
  FinishedExec,
  RecoveredExec,
  SandboxEnd,
  SessionSandbox,
} from '../../sessions.js';
import { deleteSandbox, PodChannel, type SandboxRef } from './pod-channel.js';
import { ownershipProblem, refuseAttach, type SandboxObject } from './sandbox-checks.js';
import { recordedEnd } from './sandbox-end.js';
import { lastHolderOf, SessionLease } from './session-lease.js';

const RESYNC_TIMEOUT_MS = 10_000;

export interface LeasedSessionDeps {
  kube: Pick<
    KubeClient,
    | 'attach'
    | 'getObject'
    | 'patchObject'
    | 'deleteObject'
    | 'getPod'
    | 'getLease'
    | 'createLease'
    | 'replaceLease'
  >;
  /** This replica's identity: the Lease's holderIdentity while it holds the session. */
  holder: string;
  /** How long after the last operation the replica keeps the session attached. */
  lingerMs: number;
  /** How long a request waits for another replica to let go before it fails BUSY. */
  takeWaitMs: number;
  logger?: Logger | undefined;
}

interface Held {
  lease: SessionLease;
  channel: PodChannel;
  runner: RunnerSession;
}

/** Checks the pod is the Sandbox's own (sandbox-checks.ts), reading both afresh. */
export async function verifiedPod(
  kube: Pick<KubeClient, 'getObject' | 'getPod'>,
  ref: Pick<SandboxRef, 'namespace' | 'name'>,
  principal: string,
): Promise<{ sandbox: SandboxObject; podName: string; uid: string }> {
  const sandbox = await kube.getObject<SandboxObject>(SANDBOX, ref.namespace, ref.name);
  if (!sandbox) throw new AppError('NOT_FOUND', `no Sandbox ${ref.namespace}/${ref.name}`);
  const podName = sandbox.status?.podName;
  if (sandbox.status?.phase !== 'Ready' || !podName)
    throw new AppError(
      'NOT_FOUND',
      `Sandbox ${ref.namespace}/${ref.name} is ${sandbox.status?.phase ?? 'not ready'}`,
    );
  const pod = await kube.getPod(ref.namespace, podName);
  if (!pod)
    throw new AppError('NOT_FOUND', `the pod ${podName} of Sandbox ${ref.namespace}/${ref.name} is gone`);
  const problem = ownershipProblem(sandbox, pod, principal);
  if (problem) throw refuseAttach(problem);
  return { sandbox, podName, uid: sandbox.metadata?.uid ?? '' };
}

/** How the operator served the session, as its Sandbox's status says (warm: a pool's ready pod). */
export function servedOf(sandbox: SandboxObject | undefined): 'warm' | 'cold' {
  return sandbox?.status?.served === 'warm' ? 'warm' : 'cold';
}

export class LeasedSession implements SessionSandbox {
  readonly sessionId: string;
  readonly served: 'warm' | 'cold';
  readonly ended: Promise<SandboxEnd>;
  private readonly deps: LeasedSessionDeps;
  private readonly ref: SandboxRef;
  private readonly principal: string;
  private spec: EffectiveSessionSpec | undefined;
  private held: Held | undefined;
  private acquiring: Promise<Held> | undefined;
  private releasing: Promise<void> = Promise.resolve();
  private inFlight = 0;
  private linger: NodeJS.Timeout | undefined;
  private closed = false;
  private endResolve!: (end: SandboxEnd) => void;

  constructor(
    deps: LeasedSessionDeps,
    /** No spec: one that is taken over learns it from its runner's record (holdAndRecover). */
    s: { ref: SandboxRef; principal: string; spec?: EffectiveSessionSpec; served?: 'warm' | 'cold' },
  ) {
    this.deps = deps;
    this.ref = s.ref;
    this.sessionId = s.ref.name;
    this.principal = s.principal;
    this.spec = s.spec;
    this.served = s.served ?? 'cold';
    this.ended = new Promise((r) => (this.endResolve = r));
  }

  /** Starts holding with what the creator made: the Lease it created and the channel it opened. */
  adoptHeld(lease: SessionLease, channel: PodChannel): void {
    this.install(lease, channel);
    this.idle();
  }

  /**
   * Holds the session now, and follows the execs its runner reports (a restarted or another
   * replica); `specOf` reads the session's spec from the runner's record (and may refuse it).
   */
  async holdAndRecover(
    specOf: (info: ResyncInfo) => EffectiveSessionSpec,
  ): Promise<{ info: ResyncInfo; execs: RecoveredExec[] }> {
    const { held, info } = await this.acquire(specOf);
    const execs = held.runner.recover(info.execs ?? []);
    if (execs.length > 0) {
      this.inFlight += execs.length;
      for (const e of execs) void e.result.catch(() => undefined).finally(() => this.opEnded());
    } else this.idle();
    return { info, execs };
  }

  private install(lease: SessionLease, channel: PodChannel): Held {
    if (!this.spec) throw new AppError('INTERNAL', `session ${this.sessionId} has no spec`);
    const runner = new RunnerSession({
      sessionId: this.sessionId,
      client: channel.client,
      host: channel,
      spec: this.spec,
      served: this.served,
    });
    const held: Held = { lease, channel, runner };
    lease.isBusy = () => this.inFlight > 0;
    lease.onLost = (holder) => {
      this.deps.logger?.warn(
        { sessionId: this.sessionId, holder },
        'another gateway replica took the session',
      );
      if (this.held === held) this.held = undefined;
      runner.detach();
    };
    void runner.ended.then((end) => {
      if (this.held !== held) return;
      this.held = undefined;
      // Ended by itself: the operator records it, and nothing here removes the Sandbox.
      this.closed = true;
      lease.stop();
      this.endResolve(end);
    });
    this.held = held;
    return held;
  }

  /** Takes the Lease, checks the pod, attaches and resyncs. */
  private async acquire(
    specOf?: (info: ResyncInfo) => EffectiveSessionSpec,
  ): Promise<{ held: Held; info: ResyncInfo }> {
    await this.releasing;
    const { kube, holder, takeWaitMs, logger } = this.deps;
    // The ownership check first: a forged Sandbox gets no Lease write either.
    await verifiedPod(kube, this.ref, this.principal);
    const lease = await SessionLease.take(
      kube,
      { namespace: this.ref.namespace, name: this.ref.name, holder, waitMs: takeWaitMs },
      logger,
    );
    let channel: PodChannel | undefined;
    try {
      channel = await PodChannel.attach(kube, this.ref, lease.channelKey);
      const info = await withTimeout(
        channel.client.resync(),
        RESYNC_TIMEOUT_MS,
        "the session's runner did not answer",
      );
      if (specOf) this.spec = specOf(info);
      else if (this.spec && info.ttlMs !== undefined)
        this.spec = { ...this.spec, ttlSeconds: Math.round(info.ttlMs / 1000) };
      return { held: this.install(lease, channel), info };
    } catch (e) {
      channel?.detach();
      await lease.release().catch(() => {});
      throw e;
    }
  }

  private hold(): Promise<RunnerSession> {
    if (this.closed) return Promise.reject(new AppError('NOT_FOUND', `session ${this.sessionId} was closed`));
    if (this.held) return Promise.resolve(this.held.runner);
    this.acquiring ??= this.acquire()
      .then((r) => r.held)
      .finally(() => (this.acquiring = undefined));
    return this.acquiring.then((h) => h.runner);
  }

  private opStarted(): void {
    clearTimeout(this.linger);
    this.linger = undefined;
    this.inFlight++;
    this.held?.lease.touch();
  }

  private opEnded(): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    this.held?.lease.touch();
    this.idle();
  }

  /** With nothing in flight, lets go after the linger. */
  private idle(): void {
    if (this.inFlight > 0 || this.linger || this.closed) return;
    this.linger = setTimeout(() => {
      this.linger = undefined;
      if (this.inFlight === 0) this.releasing = this.letGo();
    }, this.deps.lingerMs);
    this.linger.unref();
  }

  /** Detaches and releases the Lease (the last activity with it); the session keeps running. */
  async letGo(): Promise<void> {
    clearTimeout(this.linger);
    this.linger = undefined;
    const held = this.held;
    if (!held) return;
    this.held = undefined;
    held.runner.detach();
    await held.lease.release().catch(() => {});
  }

  private async op<T>(fn: (runner: RunnerSession) => Promise<T>): Promise<T> {
    this.opStarted();
    try {
      return await fn(await this.hold());
    } finally {
      this.opEnded();
    }
  }

  /** `data`, with the operation in flight until it is read to its end (or dropped). */
  private async *streamed(data: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
    try {
      yield* data;
    } finally {
      this.opEnded();
    }
  }

  exec(exec: EffectiveExec, options: ExecOptions): ExecExecution {
    this.opStarted();
    const inner = this.hold().then((r) => r.exec(exec, options));
    const result = inner.then((e) => e.result);
    void result.catch(() => undefined).finally(() => this.opEnded());
    const later = (fn: (e: ExecExecution) => void): void => void inner.then(fn, () => undefined);
    return {
      execId: options.execId,
      result,
      writeStdin: async (data) => (await inner).writeStdin(data),
      endStdin: () => later((e) => e.endStdin()),
      resize: (cols, rows) => later((e) => e.resize(cols, rows)),
      kill: () => later((e) => e.kill()),
    };
  }

  writeFile(write: FileWrite): Promise<FileEntry> {
    return this.op((r) => r.writeFile(write));
  }

  async readFile(read: { path: string; maxBytes: number }): Promise<FileRead> {
    this.opStarted();
    try {
      const file = await (await this.hold()).readFile(read);
      return { entry: file.entry, data: this.streamed(file.data) };
    } catch (e) {
      this.opEnded();
      throw e;
    }
  }

  list(list: { path: string; recursive: boolean }): Promise<FileEntry[]> {
    return this.op((r) => r.list(list));
  }

  remove(remove: { path: string; recursive: boolean }): Promise<void> {
    return this.op((r) => r.remove(remove));
  }

  mkdir(mkdir: { path: string }): Promise<FileEntry> {
    return this.op((r) => r.mkdir(mkdir));
  }

  artifacts(artifacts: { path: string; maxBytes: number }): AsyncIterable<Buffer> {
    this.opStarted();
    return this.artifactStream(artifacts);
  }

  private async *artifactStream(artifacts: { path: string; maxBytes: number }): AsyncIterable<Buffer> {
    try {
      yield* (await this.hold()).artifacts(artifacts);
    } finally {
      this.opEnded();
    }
  }

  /** A watch keeps the session held (and its Lease live) until it is stopped. */
  async watch(path: string, onChange: (change: FileChange) => void): Promise<() => void> {
    this.opStarted();
    try {
      const stop = await (await this.hold()).watch(path, onChange);
      let stopped = false;
      return () => {
        if (stopped) return;
        stopped = true;
        stop();
        this.opEnded();
      };
    } catch (e) {
      this.opEnded();
      throw e;
    }
  }

  async processes(): Promise<{ pid: number; command: string }[] | undefined> {
    if (!this.held) return undefined;
    return this.op((r) => r.processes());
  }

  /** Read where the runner is: this replica holds the session for it (taking it over when it must). */
  history(): Promise<FinishedExec[]> {
    return this.op((r) => r.history());
  }

  /**
   * A new whole lifetime: recorded in the Sandbox's spec first (the operator recomputes its
   * expiresAt from it; the pod's own deadline is the policy's ceiling), then told to the runner.
   */
  async setTtl(ttlSeconds: number): Promise<void> {
    const { namespace, name } = this.ref;
    await this.deps.kube.patchObject(SANDBOX, { namespace, name }, [
      { op: 'replace', path: '/spec/ttlSeconds', value: ttlSeconds },
    ]);
    await this.op((r) => r.setTtl(ttlSeconds));
    if (this.spec) this.spec = { ...this.spec, ttlSeconds };
  }

  /**
   * Whether the session ended while this replica did not hold it (another replica deleted it, its
   * Sandbox expired or was deleted from outside): its end, then, and this session is done.
   */
  async endedElsewhere(): Promise<SandboxEnd | undefined> {
    if (this.held || this.acquiring || this.closed) return undefined;
    const { namespace, name } = this.ref;
    const sandbox = await this.deps.kube.getObject<SandboxObject>(SANDBOX, namespace, name);
    const recorded = recordedEnd(sandbox, { namespace, name });
    if (!recorded) return undefined;
    const end: SandboxEnd = sandbox
      ? { ...recorded, recordedElsewhere: await this.anotherHeldLast() }
      : recorded;
    this.closed = true;
    this.endResolve(end);
    return end;
  }

  /**
   * An end the Sandbox records is audited by the replica that held the session last (the Lease
   * says which); every other one that knew the session ends it without a record. A Lease that
   * names none (made before the annotation, or gone) leaves it to this replica.
   */
  private async anotherHeldLast(): Promise<boolean> {
    const lease = await this.deps.kube.getLease(this.ref.namespace, this.ref.name);
    const last = lease && lastHolderOf(lease);
    return last !== undefined && last !== this.deps.holder;
  }

  /**
   * Deleted: deletes the Sandbox. At the gateway's own deadline (its TTL or idle timer), lets go
   * and leaves the Sandbox to the runner and the operator: the runner ends the session at the
   * same deadline (the open request set it), the operator at its own (or the pod's
   * activeDeadlineSeconds), and the operator keeps the record for ttlSecondsAfterFinished.
   */
  async close(reason: SessionReason): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.linger);
    const held = this.held;
    this.held = undefined;
    if (reason !== 'Deleted') {
      held?.lease.stop();
      held?.runner.detach();
      return;
    }
    if (held) {
      held.lease.stop();
      await held.runner.close(reason);
    } else await deleteSandbox(this.deps.kube, this.ref);
  }
}
