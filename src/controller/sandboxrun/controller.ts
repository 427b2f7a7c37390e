/**
 * The SandboxRun controller: what the manager needs to run SandboxRuns (DESIGN.md §4). Its
 * reconciler is reconcileRun() over the manager's caches, with the runs this controller just wrote
 * (the status overlay), and it keeps the runs-by-phase gauge.
 */
import { SANDBOX_RUN, type SandboxRun } from '../../api/v1alpha1/sandboxrun.js';
import { objectKey } from '../../kube/objects.js';
import type { AuditTrail } from '../../observability/audit-trail.js';
import type { Policy } from '../../policy/policy.js';
import type { KindController } from '../kind-controller.js';
import { countPhases } from '../metrics.js';
import type { PodSettings } from '../pod/build-sandbox-pod.js';
import type { ClusterEgress } from '../pod/egress.js';
import { StatusOverlay } from '../status-overlay.js';
import type { OutputLimits } from './read-output.js';
import { reconcileRun, type RunSettings } from './reconcile.js';
import { PoolAttachments } from './pool-attachments.js';
import { WarmServes } from './warm-serves.js';

export interface SandboxRunSettings {
  policy: Policy;
  /** One record per finished run: logged, and in the audit file when one is configured. */
  audit: Pick<AuditTrail, 'record'>;
  pod: PodSettings;
  output: OutputLimits;
  runSettings: RunSettings;
  /**
   * The cluster enforces NetworkPolicy (declared in the config). Otherwise the runner refuses a
   * job with egress none in a sandbox that has any interface but lo: it fails closed.
   */
  networkPolicyEnforced: boolean;
  /** The egress proxy, when the cluster runs one: runs with an allowlist are admitted only then. */
  egress?: ClusterEgress | undefined;
}

const phaseOf = (run: SandboxRun): string => run.status?.phase ?? '';

export function sandboxRunController(settings: SandboxRunSettings): KindController<SandboxRun> {
  return {
    kind: SANDBOX_RUN,
    logField: 'run',
    reconciler(context) {
      const runs = context.objects;
      const overlay = new StatusOverlay();
      const warm = new WarmServes();
      const attachments = new PoolAttachments({ kube: context.kube, logger: context.logger });
      context.metrics.observeRunPhases(() => countPhases(runs.list()));
      const deps = { ...context, ...settings, runs, overlay, warm, attachments };
      return {
        reconcile: (key) => reconcileRun(deps, key),
        forget: (key) => {
          overlay.forget(key);
          // A run deleted while served here: the serve stops, and the garbage collector takes the pod.
          warm.forget(key);
        },
        // Idle pool pods are attached to ahead of their claim, by the leader only.
        observePod: (type, pod) => attachments.observe(type, pod),
        setActive: (active) => attachments.setActive(active, context.pods.list()),
        // A RuntimeClass appearing (or going) matters to runs still waiting for their pod.
        waitingForRuntimeClasses: () =>
          runs
            .list()
            .filter((run) => phaseOf(run) === 'Pending')
            .map(objectKey),
      };
    },
  };
}
