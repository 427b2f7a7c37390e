/** The shared path of every tool that runs code: start through the service, stream, wait for the result. */
import type { RunRequestInput, RunResult } from '../../api/run.js';
import { clientWants, principalOf, type ToolDeps, type ToolExtra } from './context.js';
import { relayOutput } from './relay.js';

export async function runStreamed(
  deps: ToolDeps,
  request: RunRequestInput,
  extra: ToolExtra,
): Promise<RunResult> {
  const handle = await deps.service.startRun(request, principalOf(extra, deps), extra.signal);
  await relayOutput(handle, extra, { log: clientWants(deps, 'info') });
  return handle.result;
}
