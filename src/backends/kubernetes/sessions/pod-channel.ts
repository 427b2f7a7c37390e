/**
 * One attachment to a session pod's runner (pods/attach, stdin and stdout): the SessionHost of a
 * RunnerSession on Kubernetes. The attach starts after the runner wrote its ready frame (the
 * operator saw it before it set Ready), so the bytes that come are the runner's records. Removing
 * the session deletes its Sandbox (the pod and the Lease go with it, by ownerReference). A session
 * that ended by itself is left to the operator: it records the end in the Sandbox's status, and
 * its ttlSecondsAfterFinished deletes the Sandbox.
 */
import { SANDBOX_CONTAINER } from '../../../api/v1alpha1/labels.js';
import { SANDBOX } from '../../../api/v1alpha1/sandbox.js';
import type { KubeClient } from '../../../kube/client.js';
import type { AttachedPod } from '../../../kube/attach.js';
import { isNotFound } from '../../../kube/errors.js';
import { SessionClient } from '../../../runner/session-client.js';
import { sleep } from '../../../shared/abort.js';
import type { SessionHost } from '../../session-sandbox.js';
import type { SandboxEnd } from '../../sessions.js';
import type { SandboxObject } from './sandbox-checks.js';
import { podEnd, recordedEnd, runnerEndStands } from './sandbox-end.js';

/** How long a pod whose attach closed is given for the operator to say how its Sandbox ended. */
const END_WAIT_MS = 5000;

export interface SandboxRef {
  namespace: string;
  name: string;
  uid: string;
  podName: string;
}

export type ChannelApi = Pick<KubeClient, 'attach' | 'getObject' | 'deleteObject'>;

export class PodChannel implements SessionHost {
  readonly client: SessionClient;
  readonly gone: Promise<void>;
  private readonly kube: ChannelApi;
  private readonly ref: SandboxRef;
  private readonly attached: AttachedPod;
  private detached = false;

  private constructor(kube: ChannelApi, ref: SandboxRef, attached: AttachedPod, client: SessionClient) {
    this.kube = kube;
    this.ref = ref;
    this.attached = attached;
    this.client = client;
    this.gone = attached.closed.then(() => undefined);
  }

  static async attach(kube: ChannelApi, ref: SandboxRef, key: Buffer): Promise<PodChannel> {
    // Bytes that come before the client exists are kept, then handed to it in order.
    const to: { client?: SessionClient } = {};
    const early: Buffer[] = [];
    const attached = await kube.attach(
      { namespace: ref.namespace, pod: ref.podName, container: SANDBOX_CONTAINER },
      (b) => (to.client ? to.client.push(b) : early.push(Buffer.from(b))),
    );
    const client = new SessionClient({ write: (parts) => attached.write(parts) }, key);
    for (const b of early) client.push(b);
    to.client = client;
    const self = new PodChannel(kube, ref, attached, client);
    void attached.closed.then((why) => {
      if (!self.detached) client.transportClosed(why);
    });
    return self;
  }

  /**
   * How the session ended by itself. The runner's own record says why when it ended by its TTL,
   * its idleness or a close. When it was stopped from outside, or said nothing (the attach closed
   * first), the operator's record says why (waiting briefly for it): the operator stops the pod of
   * a session it ended (its TTL counts from the Sandbox's creation, so it comes first, and the pod's
   * activeDeadlineSeconds after it), and records a pod deleted from outside as RunnerGone.
   */
  async endOf(own: SandboxEnd | undefined): Promise<SandboxEnd> {
    if (runnerEndStands(own)) return own;
    return podEnd(own, await this.operatorEnd(), this.ref.podName);
  }

  /** The end the operator wrote in the Sandbox's status, waiting up to END_WAIT_MS for one. */
  private async operatorEnd(): Promise<SandboxEnd | undefined> {
    const until = Date.now() + END_WAIT_MS;
    for (;;) {
      const sandbox = await this.kube
        .getObject<SandboxObject>(SANDBOX, this.ref.namespace, this.ref.name)
        .catch(() => undefined);
      // Gone is not by this process (its close() is not an end by itself).
      const end = recordedEnd(sandbox, this.ref);
      if (end || Date.now() >= until) return end;
      await sleep(250);
    }
  }

  /** Deletes the Sandbox (only the one with this uid); idempotent, never throws. */
  async remove(): Promise<void> {
    this.detached = true;
    this.attached.close();
    await deleteSandbox(this.kube, this.ref);
  }

  detach(): void {
    this.detached = true;
    this.attached.close();
  }

  /** The operator keeps the record of an end (ttlSecondsAfterFinished removes it): only let go. */
  retire(): Promise<void> {
    this.detach();
    return Promise.resolve();
  }
}

export async function deleteSandbox(
  kube: Pick<KubeClient, 'deleteObject'>,
  ref: Omit<SandboxRef, 'podName'>,
): Promise<void> {
  await kube
    .deleteObject(SANDBOX, ref)
    .catch((e: unknown) => {
      if (!isNotFound(e)) throw e;
    })
    .catch(() => {});
}
