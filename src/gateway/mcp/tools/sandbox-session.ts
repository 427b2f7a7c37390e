/** sandbox_create, sandbox_list, sandbox_delete: a session's lifecycle. */
import type { ToolSpec } from '../tool-spec.js';
import { principalOf } from '../context.js';
import { renderSession } from '../render.js';
import { toolResult } from '../results.js';
import { templateOf } from '../run.js';
import type { RunToolArgs, ToolSchemas } from '../schemas.js';
import { SessionListOutput, SessionOutput, type SessionSchemas } from '../session-schemas.js';
import { READ_ANNOTATIONS } from './get-run.js';
import { END_ANNOTATIONS, RUN_ANNOTATIONS } from './run-code.js';

export function sandboxCreateTool(schemas: SessionSchemas): ToolSpec {
  return {
    name: 'sandbox_create',
    title: 'Create a session',
    description:
      'A sandbox that lives across calls: files and state persist between sandbox_exec calls until sandbox_delete, its TTL or idle time.',
    input: schemas.create,
    output: SessionOutput,
    annotations: RUN_ANNOTATIONS,
    handler: (deps) => async (args: RunToolArgs, extra) => {
      const { language: _l, template: _t, ...rest } = args;
      const template = templateOf(deps, args, args.image === undefined ? 'python' : undefined);
      const session = await deps.service.sessions.create(
        { ...rest, ...(template ? { template } : {}) },
        principalOf(extra, deps),
        { signal: extra.signal },
      );
      return toolResult(SessionOutput, session, renderSession(session));
    },
  };
}

export function sandboxListTool(schemas: ToolSchemas): ToolSpec {
  return {
    name: 'sandbox_list',
    title: 'List sessions',
    description: 'Your sessions, live and recently ended.',
    input: schemas.none,
    output: SessionListOutput,
    annotations: READ_ANNOTATIONS,
    handler: (deps) => async (_args: object, extra) => {
      const sessions = await deps.service.sessions.list(principalOf(extra, deps));
      const text = sessions.length ? sessions.map(renderSession).join('\n\n') : 'no sessions';
      return toolResult(SessionListOutput, { sessions }, text);
    },
  };
}

export function sandboxDeleteTool(schemas: SessionSchemas): ToolSpec {
  return {
    name: 'sandbox_delete',
    title: 'Delete a session',
    description: 'Ends a session: kills its processes and removes its sandbox and files.',
    input: schemas.bySession,
    output: SessionOutput,
    annotations: END_ANNOTATIONS,
    handler: (deps) => async (args: { sessionId: string }, extra) => {
      const session = await deps.service.sessions.delete(args.sessionId, principalOf(extra, deps));
      return toolResult(SessionOutput, session, renderSession(session));
    },
  };
}
