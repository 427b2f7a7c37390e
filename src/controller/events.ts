/**
 * Kubernetes Events (core/v1) on the objects the operator reconciles, so `kubectl describe sbr`
 * tells the story. Recording one never waits and never fails a reconcile: it is stamped at once and
 * queued, and the queue writes them one at a time, in order, each SEND_AFTER_MS after it was
 * recorded, so that their writes come after the ones a caller waits for (a warm run's claim and
 * result), not among them. One that cannot be written is logged and dropped, as are those recorded
 * while MAX_QUEUED wait (as client-go's recorder drops them when its queue is full).
 */
import type { KubeClient } from '../kube/client.js';
import type { KubeEvent } from '../kube/objects.js';
import type { Logger } from '../observability/logger.js';
import { sleep } from '../shared/abort.js';
import type { ObjectRef } from './children.js';

export const EVENT_SOURCE = 'sandpit-operator';

export interface EventRecorder {
  normal(obj: ObjectRef, reason: string, message: string): void;
  warning(obj: ObjectRef, reason: string, message: string): void;
}

/** The operator's recorder: also writes what is queued, at once (when it stops). */
export interface QueuedEventRecorder extends EventRecorder {
  flush(): Promise<void>;
}

const SEND_AFTER_MS = 100;
const MAX_QUEUED = 1000;

export function buildEvent(
  obj: ObjectRef,
  event: { type: 'Normal' | 'Warning'; reason: string; message: string },
  at: Date,
  instance: string,
): KubeEvent {
  const stamp = at.toISOString();
  const micro = stamp.replace(/Z$/, '000Z');
  return {
    metadata: {
      name: `${obj.name.slice(0, 200)}.${(at.getTime() * 1000 + Math.floor(Math.random() * 1000)).toString(16)}`,
      namespace: obj.namespace,
    },
    involvedObject: {
      apiVersion: obj.apiVersion,
      kind: obj.kind,
      name: obj.name,
      namespace: obj.namespace,
      uid: obj.uid,
    },
    type: event.type,
    reason: event.reason,
    message: event.message.slice(0, 1024),
    source: { component: EVENT_SOURCE },
    reportingComponent: `sandpit.dev/${EVENT_SOURCE}`,
    reportingInstance: instance,
    action: event.reason,
    firstTimestamp: stamp,
    lastTimestamp: stamp,
    eventTime: micro,
    count: 1,
  };
}

export function createEventRecorder(deps: {
  kube: KubeClient;
  logger: Logger;
  instance: string;
  now: () => Date;
}): QueuedEventRecorder {
  const queue: { event: KubeEvent; object: string; due: number }[] = [];
  let sending: Promise<void> | undefined;
  // Aborted by flush(): what waits is written at once.
  let flushing = new AbortController();
  const drop = (object: string, reason: string, why: string): void =>
    deps.logger.warn({ object, reason, err: why }, 'Dropped Event');
  const send = async (): Promise<void> => {
    for (let next = queue[0]; next; next = queue[0]) {
      const wait = next.due - Date.now();
      if (wait > 0) await sleep(wait, flushing.signal).catch(() => undefined);
      queue.shift();
      try {
        await deps.kube.createEvent(next.event.metadata?.namespace ?? '', next.event);
      } catch (e) {
        drop(next.object, next.event.reason ?? '', (e as Error).message);
      }
    }
    sending = undefined;
  };
  const record = (obj: ObjectRef, type: 'Normal' | 'Warning', reason: string, message: string): void => {
    const object = `${obj.kind} ${obj.namespace}/${obj.name}`;
    if (queue.length >= MAX_QUEUED) return drop(object, reason, `${MAX_QUEUED} Events wait to be written`);
    const event = buildEvent(obj, { type, reason, message }, deps.now(), deps.instance);
    queue.push({ event, object, due: Date.now() + SEND_AFTER_MS });
    sending ??= send();
  };
  return {
    normal: (obj, reason, message) => record(obj, 'Normal', reason, message),
    warning: (obj, reason, message) => record(obj, 'Warning', reason, message),
    flush: async () => {
      flushing.abort();
      await sending;
      flushing = new AbortController();
    },
  };
}
