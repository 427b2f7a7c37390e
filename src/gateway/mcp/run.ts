/** The shared path of every tool that runs code: start through the service, stream, wait for the result. */
import type { RunRequestInput, RunResult } from '../../api/run.js';
import { findTemplate } from '../../policy/templates.js';
import { AppError } from '../../shared/errors.js';
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
  handle.delivered();
  return result;
}

/**
 * The template a run tool's call names: `language` (the schema's name), or `template` (accepted
 * quietly), or an alias of either (`py`), as the template's own name; else `fallback`.
 */
export function templateOf(
  deps: ToolDeps,
  args: { language?: string | undefined; template?: string | undefined },
  fallback: string | undefined,
): string | undefined {
  const { language, template } = args;
  if (language !== undefined && template !== undefined && language !== template) {
    throw new AppError('INVALID_REQUEST', `language "${language}" and template "${template}" disagree`, {
      violations: [{ field: 'language', message: 'give one of language or template' }],
      hint: 'send only language',
    });
  }
  const name = language ?? template;
  if (name === undefined) return fallback;
  return findTemplate(deps.service.policy.templates, name)?.name ?? name;
}
