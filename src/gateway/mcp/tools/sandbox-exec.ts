/** sandbox_exec: a command in a session, its output streamed as run_code's is; or an earlier exec's state. */
import type { ToolSpec } from '../tool-spec.js';
import { clientWants, principalOf } from '../context.js';
import { OutputRelay } from '../relay.js';
import { renderRun } from '../render.js';
import { toolResult } from '../results.js';
import { ExecResultOutput, type SessionSchemas } from '../session-schemas.js';
import { execTaskId } from '../tasks.js';
import { AppError } from '../../../shared/errors.js';
import { CHANGE_ANNOTATIONS } from './run-code.js';

interface ExecArgs {
  sessionId: string;
  execId?: string | undefined;
  kill?: boolean | undefined;
  background?: boolean | undefined;
  [field: string]: unknown;
}

export function sandboxExecTool(schemas: SessionSchemas): ToolSpec {
  return {
    name: 'sandbox_exec',
    title: 'Run a command in a session',
    description:
      'Runs command (argv) or shell in a session’s workspace and returns its result; background: true returns at once (then pass execId).',
    input: schemas.exec,
    output: ExecResultOutput,
    annotations: CHANGE_ANNOTATIONS,
    handler: (deps) => async (args: ExecArgs, extra) => {
      const { sessionId, execId, kill, ...request } = args;
      const principal = principalOf(extra, deps);
      const sessions = deps.service.sessions;
      await sessions.serve(sessionId, principal);
      if (execId !== undefined) {
        const result = kill
          ? await sessions.killExec(sessionId, execId, principal)
          : await sessions.execResult(sessionId, execId, principal);
        return toolResult(ExecResultOutput, result, renderRun(result));
      }
      if (request.background) {
        const handle = sessions.exec(sessionId, principal, request);
        const now = sessions.startedResult(sessionId, handle.execId, principal);
        return toolResult(ExecResultOutput, now, `${handle.execId} started in the background`);
      }
      const relay = new OutputRelay(extra, { log: clientWants(deps, 'info') });
      const handle = sessions.exec(sessionId, principal, request, {
        signal: extra.signal,
        onOutput: (chunk) => relay.add(chunk),
      });
      relay.execStarted(sessionId, handle.execId);
      const result = await handle.result;
      await relay.end();
      return toolResult(ExecResultOutput, result, renderRun(result));
    },
    // As a task, an exec in the session's record: no request's signal, so no disconnect kills it.
    task: (deps) => async (args: ExecArgs, extra) => {
      const { sessionId, execId, kill: _kill, ...request } = args;
      if (execId !== undefined) {
        throw new AppError(
          'INVALID_REQUEST',
          'a task starts an exec; execId reads one (call without a task)',
          {
            violations: [{ field: 'execId', message: 'not with a task: send command or shell' }],
          },
        );
      }
      const principal = principalOf(extra, deps);
      await deps.service.sessions.serve(sessionId, principal);
      const handle = deps.service.sessions.exec(sessionId, principal, request);
      return execTaskId(sessionId, handle.execId);
    },
  };
}
