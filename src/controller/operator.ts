/**
 * The operator's lifecycle: campaign for the Lease (when leader election is on) and let the
 * controller act only while leading. The controller is made on first leadership; when the Lease
 * is lost (it could not be renewed in time, e.g. the apiserver was down) the controller pauses
 * (its caches stay warm, no work is taken) and resumes when the Lease is won back, so no process
 * restart is needed. On shutdown the controller drains before the Lease is given up, so two
 * replicas never act at once and a clean hand-over does not wait for the Lease to expire.
 */
import { Controller, type ControllerOptions } from './controller.js';
import { LeaderElector, type LeaderElectionOptions } from './leader-election.js';

export interface OperatorOptions extends ControllerOptions {
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
  let controller: Controller | undefined;
  let starting: Promise<void> | undefined;
  const elector = options.leaderElection
    ? new LeaderElector({ kube: options.kube, logger }, options.leaderElection)
    : undefined;

  const lead = (): void => {
    metrics.leader.set(1);
    if (controller) {
      controller.setActive(true);
      return;
    }
    controller = new Controller(options);
    starting = controller
      .start()
      .catch((e: unknown) => logger.error({ err: (e as Error).message }, 'Controller failed to start'));
  };
  const pause = (): void => {
    metrics.leader.set(0);
    controller?.setActive(false);
    logger.warn('Paused the controller until the Lease is won back');
  };
  const stopController = async (): Promise<void> => {
    await starting;
    await controller?.stop();
    controller = undefined;
  };

  return {
    isLeader: () => (elector ? elector.isLeader() : true),
    isReady: () => (elector && !elector.isLeader() ? true : (controller?.isReady() ?? false)),
    isHealthy: (maxFailingMs) => (controller?.failingMs() ?? 0) <= maxFailingMs,
    async run(signal: AbortSignal): Promise<void> {
      if (!elector) {
        lead();
        await new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => resolve(), { once: true }),
        );
      } else {
        await elector.run(signal, { onStartedLeading: lead, onStoppedLeading: pause });
      }
      await stopController();
      await elector?.release();
      metrics.leader.set(0);
    },
  };
}
