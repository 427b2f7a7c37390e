/** What network a run may have: none, today (egress rules are the next step). Pure. */
import type { RunRequest } from '../api/run.js';
import type { Decision } from './decision.js';

export function checkNetwork(request: Pick<RunRequest, 'network'>, d: Decision): 'none' {
  const egress = request.network?.egress ?? 'none';
  if (egress !== 'none') {
    d.deny({
      field: 'network.egress',
      message: `egress "${egress}" is not available: sandboxes have no network (egress rules are not implemented)`,
      limit: 'none',
      requested: egress,
    });
  }
  return 'none';
}
