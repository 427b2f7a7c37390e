/** sandbox_exec: a command in a session, its output streamed as run_code's is; or an earlier exec's state. */
import type { ToolSpec } from '../catalog.js';
import { clientWants, principalOf } from '../context.js';
import { OutputRelay } from '../relay.js';
import { renderRun } from '../render.js';
import { toolResult } from '../results.js';
import { ExecResultOutput, type SessionSchemas } from '../session-schemas.js';
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
  };
}
