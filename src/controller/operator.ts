/**
 * The operator: the kinds it reconciles (SandboxRun, Sandbox, SandboxPool), and its lifecycle. It campaigns for the
 * Lease (when leader election is on) and lets the manager act only while leading. The manager is
 * made on first leadership; when the Lease is lost (it could not be renewed in time, e.g. the
 * apiserver was down) it pauses (its caches stay warm, no work is taken) and resumes when the Lease
 * is won back, so no process restart is needed. On shutdown the manager drains before the Lease is
 * given up, so two replicas never act at once and a clean hand-over does not wait for the Lease to
 * expire.
 */
import { LeaderElector, type LeaderElectionOptions } from './leader-election.js';
import { Manager, type ManagerOptions } from './manager.js';
import { sandboxController } from './sandbox/controller.js';
import { sandboxPoolController } from './sandboxpool/controller.js';
import { sandboxRunController, type SandboxRunSettings } from './sandboxrun/controller.js';

export interface OperatorOptions extends ManagerOptions, SandboxRunSettings {
  leaderElection: LeaderElectionOptions | undefined;
}

export interface Operator {
  /** Runs until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
  isLeader(): boolean;
  /** Ready: a standby waiting for the Lease, or a leader whose caches are synced. */
  isReady(): boolean;
  /** Healthy unless a leader's watches have been failing for longer than `maxFailingMs`. */
  isHealthy(maxFailingMs: number): boolean;
}

export function createOperator(options: OperatorOptions): Operator {
  const { logger, metrics } = options;
  let manager: Manager | undefined;
  let starting: Promise<void> | undefined;
  const elector = options.leaderElection
    ? new LeaderElector({ kube: options.kube, logger }, options.leaderElection)
    : undefined;

  const lead = (): void => {
    metrics.leader.set(1);
    if (manager) {
      manager.setActive(true);
      return;
    }
    manager = new Manager(options, [
      sandboxRunController(options),
      sandboxController({
        policy: options.policy,
        pod: options.pod,
        defaultPendingTimeoutSeconds: options.runSettings.defaultPendingTimeoutSeconds,
        networkPolicyEnforced: options.networkPolicyEnforced,
        egress: options.egress,
      }),
      sandboxPoolController({
        policy: options.policy,
        pod: options.pod,
        networkPolicyEnforced: options.networkPolicyEnforced,
        egress: options.egress,
      }),
    ]);
    starting = manager
      .start()
      .catch((e: unknown) => logger.error({ err: (e as Error).message }, 'Controller failed to start'));
  };
  const pause = (): void => {
    metrics.leader.set(0);
    manager?.setActive(false);
    logger.warn('Paused the controller until the Lease is won back');
  };
  const stopManager = async (): Promise<void> => {
    await starting;
    await manager?.stop();
    manager = undefined;
  };

  return {
    isLeader: () => (elector ? elector.isLeader() : true),
    isReady: () => (elector && !elector.isLeader() ? true : (manager?.isReady() ?? false)),
    isHealthy: (maxFailingMs) => (manager?.failingMs() ?? 0) <= maxFailingMs,
    async run(signal: AbortSignal): Promise<void> {
      if (!elector) {
        lead();
        await new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => resolve(), { once: true }),
        );
      } else {
        await elector.run(signal, { onStartedLeading: lead, onStoppedLeading: pause });
      }
      await stopManager();
      await elector?.release();
      metrics.leader.set(0);
    },
  };
}
