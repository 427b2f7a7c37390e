/** The shared path of every tool that runs code: start through the service, stream, wait for the result. */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { RunRequestInput, RunResult } from '../../api/run.js';
import { findTemplate } from '../../policy/templates.js';
import { AppError } from '../../shared/errors.js';
import type { Principal } from '../principal.js';
import { clientWants, principalOf, type ToolDeps, type ToolExtra } from './context.js';
import { OutputRelay } from './relay.js';
import { renderRun } from './render.js';
import { toolResult } from './results.js';
import { runFileContent } from './run-resources.js';
import { RunResultOutput } from './schemas.js';

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
 * Starts a run as an MCP task: no request waits for it, so neither a closed response nor an ended
 * session cancels it (tasks/cancel does), nor, on Kubernetes, a gateway shutdown. Answers its id
 * once every gateway process can read it.
 */
export async function startRunTask(
  deps: ToolDeps,
  request: RunRequestInput,
  extra: ToolExtra,
): Promise<string> {
  const handle = await deps.service.runs.start(request, principalOf(extra, deps), { task: true });
  // Its outcome is read through the run's record (tasks/get, tasks/result).
  void handle.result.catch(() => undefined);
  await handle.recorded;
  return handle.runId;
}

/** A run's result as a tool result: structured, readable, and its files (images inline, others linked). */
export async function runToolResult(
  deps: ToolDeps,
  result: RunResult,
  principal: Principal,
): Promise<CallToolResult> {
  const base = toolResult(RunResultOutput, result, renderRun(result));
  const files = result.outputs?.files ?? [];
  if (files.length === 0) return base;
  const content = await Promise.all(files.map((f) => runFileContent(deps, result.runId, f, principal)));
  return { ...base, content: [...base.content, ...content] };
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
