/**
 * Egress none on a cluster not declared to enforce NetworkPolicy: the runner of a run and of a
 * session refuses a sandbox that has any network interface but lo before anything runs, and says
 * so in its termination log. How the operator reads that refusal, and what it tells the user.
 */
import { networkRefusal } from '../../runner/protocol.js';
import type { PodView } from './observe-pod.js';

/** A condition's reason when the runner refused a sandbox that has a network. */
export const NETWORK_NOT_ISOLATED = 'NetworkNotIsolated';

/** What a refused run or session says: why, and what to configure. */
export function notIsolatedMessage(iface: string, what: 'run' | 'session'): string {
  return (
    `egress is none, but the sandbox has the network interface ${iface} and this cluster is not declared to ` +
    `enforce NetworkPolicy, so the ${what} was refused before ${what === 'run' ? 'the program' : 'it'} started. ` +
    "Where the network plugin enforces NetworkPolicy, set networkPolicy.enforced: true in the chart's values " +
    '(kubernetes.operator.networkPolicyEnforced); otherwise run in a RuntimeClass whose sandbox has no network ' +
    '(e.g. gvisor, runsc --network=none)'
  );
}

/** The interface the runner found when it refused the sandbox for having a network (no report then). */
export function refusedInterface(pod: PodView): string | undefined {
  const t = pod.terminated;
  return t?.failure !== undefined && !t.report ? networkRefusal(t.failure) : undefined;
}
