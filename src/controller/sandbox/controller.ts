/**
 * The Sandbox controller: what the manager needs to run sessions on Kubernetes (DESIGN.md §4).
 * Its reconciler is reconcileSandbox() over the manager's caches (the Sandboxes, their pods and
 * NetworkPolicies, and the session Leases the gateway renews), with the Sandboxes this controller
 * just wrote (the status overlay); it keeps the sandboxes-by-phase gauge.
 */
import { SANDBOX, type Sandbox } from '../../api/v1alpha1/sandbox.js';
import { objectKey } from '../../kube/objects.js';
import type { KindController } from '../kind-controller.js';
import { countPhases } from '../metrics.js';
import { StatusOverlay } from '../status-overlay.js';
import { reconcileSandbox, type SandboxSettings } from './reconcile.js';

const phaseOf = (s: Sandbox): string => s.status?.phase ?? '';

export function sandboxController(settings: SandboxSettings): KindController<Sandbox> {
  return {
    kind: SANDBOX,
    logField: 'sandbox',
    reconciler(context) {
      const sandboxes = context.objects;
      const overlay = new StatusOverlay();
      context.metrics.observeSandboxPhases(() => countPhases(sandboxes.list()));
      const deps = { ...context, settings, sandboxes, overlay };
      return {
        reconcile: (key) => reconcileSandbox(deps, key),
        forget: (key) => overlay.forget(key),
        waitingForRuntimeClasses: () =>
          sandboxes
            .list()
            .filter((s) => phaseOf(s) === '' || phaseOf(s) === 'Creating')
            .map(objectKey),
      };
    },
  };
}
