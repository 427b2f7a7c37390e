/**
 * Kubernetes Events (core/v1) on the objects the operator reconciles, so `kubectl describe sbr`
 * tells the story. An event that cannot be written is logged and dropped: events never fail a
 * reconcile.
 */
import type { KubeClient } from '../kube/client.js';
import type { KubeEvent } from '../kube/objects.js';
import type { Logger } from '../observability/logger.js';
import type { ObjectRef } from './children.js';

export const EVENT_SOURCE = 'sandpit-operator';

export interface EventRecorder {
  normal(obj: ObjectRef, reason: string, message: string): Promise<void>;
  warning(obj: ObjectRef, reason: string, message: string): Promise<void>;
}

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
}): EventRecorder {
  const record = async (
    obj: ObjectRef,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> => {
    try {
      await deps.kube.createEvent(
        obj.namespace,
        buildEvent(obj, { type, reason, message }, deps.now(), deps.instance),
      );
    } catch (e) {
      deps.logger.warn(
        { object: `${obj.kind} ${obj.namespace}/${obj.name}`, reason, err: (e as Error).message },
        'Dropped Event',
      );
    }
  };
  return {
    normal: (obj, reason, message) => record(obj, 'Normal', reason, message),
    warning: (obj, reason, message) => record(obj, 'Warning', reason, message),
  };
}
