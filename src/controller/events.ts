/**
 * Kubernetes Events on a SandboxRun (core/v1), so `kubectl describe sbr` tells the story. An
 * event that cannot be written is logged and dropped: events never fail a reconcile.
 */
import type { KubeEvent } from '../kube/objects.js';
import { SANDBOX_RUN } from '../api/v1alpha1/sandboxrun.js';
import type { KubeClient } from '../kube/client.js';
import type { Logger } from '../observability/logger.js';
import type { RunRef } from './children.js';

export const EVENT_SOURCE = 'sandpit-operator';

export interface EventRecorder {
  normal(run: RunRef, reason: string, message: string): Promise<void>;
  warning(run: RunRef, reason: string, message: string): Promise<void>;
}

export function buildEvent(
  run: RunRef,
  event: { type: 'Normal' | 'Warning'; reason: string; message: string },
  at: Date,
  instance: string,
): KubeEvent {
  const stamp = at.toISOString();
  const micro = stamp.replace(/Z$/, '000Z');
  return {
    metadata: {
      name: `${run.name.slice(0, 200)}.${(at.getTime() * 1000 + Math.floor(Math.random() * 1000)).toString(16)}`,
      namespace: run.namespace,
    },
    involvedObject: {
      apiVersion: SANDBOX_RUN.apiVersion,
      kind: SANDBOX_RUN.kind,
      name: run.name,
      namespace: run.namespace,
      uid: run.uid,
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
    run: RunRef,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> => {
    try {
      await deps.kube.createEvent(
        run.namespace,
        buildEvent(run, { type, reason, message }, deps.now(), deps.instance),
      );
    } catch (e) {
      deps.logger.warn(
        { run: `${run.namespace}/${run.name}`, reason, err: (e as Error).message },
        'Dropped Event',
      );
    }
  };
  return {
    normal: (run, reason, message) => record(run, 'Normal', reason, message),
    warning: (run, reason, message) => record(run, 'Warning', reason, message),
  };
}
