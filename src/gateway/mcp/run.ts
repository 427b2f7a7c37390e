/** The shared path of every tool that runs code: start through the service, stream, wait for the result. */
import type { RunRequestInput, RunResult } from '../../api/run.js';
import { clientWants, principalOf, type ToolDeps, type ToolExtra } from './context.js';
import { OutputRelay } from './relay.js';

export async function runStreamed(
  deps: ToolDeps,
  request: RunRequestInput,
  extra: ToolExtra,
): Promise<RunResult> {
  const relay = new OutputRelay(extra, { log: clientWants(deps, 'info') });
  const handle = await deps.service.runs.start(request, principalOf(extra, deps), {
    signal: extra.signal,
    onOutput: (chunk) => relay.add(chunk),
  });
  relay.started(handle.runId);
  const result = await handle.result;
  await relay.end();
  return result;
}
