/**
 * The operator's lifecycle: campaign for the Lease (when leader election is on), run the controller
 * only while leading, and on shutdown drain the controller before giving the Lease up, so two
 * replicas never act at once and a clean hand-over does not wait for the Lease to expire.
 */
import { Controller, type ControllerOptions } from './controller.js';
import { LeaderElector, type LeaderElectionOptions } from './leader-election.js';

export type OperatorExit = 'stopped' | 'lost-leadership';

export interface OperatorOptions extends ControllerOptions {
  leaderElection: LeaderElectionOptions | undefined;
}

export interface Operator {
  /** Runs until `signal` aborts ('stopped') or the Lease is lost ('lost-leadership'). */
  run(signal: AbortSignal): Promise<OperatorExit>;
  isLeader(): boolean;
  /** Ready: a standby waiting for the Lease, or a leader whose caches are synced. */
  isReady(): boolean;
}

export function createOperator(options: OperatorOptions): Operator {
  const { logger, metrics } = options;
  let controller: Controller | undefined;
  let starting: Promise<void> | undefined;
  const elector = options.leaderElection
    ? new LeaderElector({ kube: options.kube, logger }, options.leaderElection)
    : undefined;

  const startController = (): void => {
    controller = new Controller(options);
    starting = controller
      .start()
      .catch((e: unknown) => logger.error({ err: (e as Error).message }, 'Controller failed to start'));
  };
  const stopController = async (): Promise<void> => {
    await starting;
    await controller?.stop();
    controller = undefined;
  };

  return {
    isLeader: () => (elector ? elector.isLeader() : true),
    isReady: () => (elector && !elector.isLeader() ? true : (controller?.isReady() ?? false)),
    async run(signal: AbortSignal): Promise<OperatorExit> {
      if (!elector) {
        metrics.leader.set(1);
        startController();
        await new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => resolve(), { once: true }),
        );
        await stopController();
        metrics.leader.set(0);
        return 'stopped';
      }
      let lost = false;
      const electing = new AbortController();
      signal.addEventListener('abort', () => electing.abort(), { once: true });
      await elector.run(electing.signal, {
        onStartedLeading: () => {
          metrics.leader.set(1);
          startController();
        },
        onStoppedLeading: () => {
          lost = true;
          metrics.leader.set(0);
        },
      });
      await stopController();
      if (!lost) await elector.release();
      metrics.leader.set(0);
      return lost ? 'lost-leadership' : 'stopped';
    },
  };
}
