/**
 * `sandpit sessions shell ID [-- ARGV]`: an interactive terminal in a session over its WebSocket
 * (GET /sessions/ID/exec/ws, subprotocol sandpit.exec.v1). The first message says what to run; then
 * binary messages whose first byte is the channel: 0 stdin, 4 resize, 255 stdin EOF from here;
 * 1 stdout, 2 stderr, 3 the exit (the ExecResult, or an error) from the gateway. The local terminal
 * is in raw mode while it runs and is restored on every way out; the exit code is the remote one.
 */
import WebSocket from 'ws';
import { ErrorBodySchema } from '../api/error.js';
import { Channel, EXEC_WS_PROTOCOL, frame } from '../api/exec-ws.js';
import { ExecResultSchema, type ExecResult, type WsExecStartInput } from '../api/session.js';
import { AppError } from '../shared/errors.js';
import { envInput, parse, printHelp, splitAtDashDash, toInt } from './args.js';
import {
  codeForStatus,
  errorFromAnswer,
  sessionPath,
  unreachable,
  type GatewayClient,
} from './gateway-client.js';
import { exitCodeOf, printEnding } from './output.js';
import { shutdownSignal } from './process.js';
import { clientOf, GATEWAY_HELP, GATEWAY_OPTIONS, printJson, sessionIdOf } from './session-flags.js';

export const SHELL_USAGE = `
usage: sandpit sessions shell ID [options] [-- ARGV...]

An interactive terminal in the session (default ARGV: bash -i; give -- sh -i for an image without
bash). When stdin is a terminal, the command runs under a pseudo-terminal (a PTY) in the sandbox,
this terminal is switched to raw mode (keys such as Ctrl-C and Ctrl-D go to the remote side), and
its size follows this window's. Exits with the remote command's exit code.

  sandpit sessions shell $ID
  sandpit sessions shell $ID -- python3 -i
  echo 'echo hi' | sandpit sessions shell $ID -- sh     stdin that is not a terminal is streamed

options:
  -t, --tty               a PTY even when stdin is not a terminal (--no-tty: never)
      --no-tty
  -e, --env NAME=VALUE    variable for this exec (repeatable), over the session's
      --cwd DIR           working directory inside the workspace
      --timeout SECONDS   deadline of the shell (default: the session's; never above the ceiling)
${GATEWAY_HELP.replace("print the gateway's answer as JSON", 'print the exec result (ExecResult) as JSON at the end')}

exit codes: the remote command's own; 124 timed out; 130 cancelled; and those of \`sandpit sessions --help\`.
`;

const SHELL_OPTIONS = {
  ...GATEWAY_OPTIONS,
  tty: { type: 'boolean', short: 't' },
  'no-tty': { type: 'boolean' },
  env: { type: 'string', short: 'e', multiple: true },
  cwd: { type: 'string' },
  timeout: { type: 'string' },
} as const;

/** The exit message: the exec's result, or the error that kept it from running. */
export function parseExit(payload: Buffer): ExecResult | AppError {
  let json: unknown;
  try {
    json = JSON.parse(payload.toString('utf8'));
  } catch {
    json = undefined;
  }
  const refused = ErrorBodySchema.safeParse(json);
  if (refused.success) return errorFromAnswer(0, JSON.stringify(refused.data), true);
  const result = ExecResultSchema.safeParse(json);
  if (result.success) return result.data;
  return new AppError('BACKEND_ERROR', 'the gateway sent an exit message this CLI does not understand');
}

/** A close without an exit message: 4000 + an HTTP status names the refusal. */
export function closeError(code: number, reason: string): AppError {
  const message = `the session's WebSocket closed (${code}${reason ? ` ${reason}` : ''}) before the command ended`;
  return new AppError(code >= 4000 && code < 5000 ? codeForStatus(code - 4000) : 'BACKEND_ERROR', message);
}

function windowSize(): { cols: number; rows: number } {
  return process.stdout.isTTY
    ? { cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 }
    : { cols: 80, rows: 24 };
}

export async function shellCommand(argv: string[]): Promise<number> {
  const { own, command } = splitAtDashDash(argv);
  const { values, positionals } = parse(own, SHELL_OPTIONS, SHELL_USAGE);
  if (values.help) return (printHelp(SHELL_USAGE), 0);
  const id = sessionIdOf(positionals, 'shell');
  const tty = values['no-tty'] ? false : (values.tty ?? Boolean(process.stdin.isTTY));
  const request: WsExecStartInput = {
    command: command?.length ? command : ['bash', '-i'],
    tty,
    ...windowSize(),
    ...(values.env ? { env: values.env.map((spec) => envInput(spec)) } : {}),
    ...(values.cwd !== undefined ? { cwd: values.cwd } : {}),
    ...(values.timeout !== undefined ? { timeoutSeconds: toInt('--timeout', values.timeout) } : {}),
  };
  const shown = { stdout: 0, stderr: 0 };
  const result = await runShell(clientOf(values), id, request, shown);
  // The terminal is itself again: the tail past the live head, and how it ended (a deadline, say).
  if (values.json) printJson(result);
  else printEnding(result, shown);
  return exitCodeOf(result);
}

function wsUrlOf(client: GatewayClient, id: string): URL {
  const url = client.urlOf(sessionPath(id, 'exec', 'ws'));
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url;
}

/** Runs the exec over the WebSocket, this process's terminal wired to it; resolves with its result. */
async function runShell(
  client: GatewayClient,
  id: string,
  request: WsExecStartInput,
  shown: { stdout: number; stderr: number },
): Promise<ExecResult> {
  const url = wsUrlOf(client, id);
  const ws = new WebSocket(url, [EXEC_WS_PROTOCOL], {
    headers: client.authHeaders(),
    perMessageDeflate: false,
  });
  const terminal = localTerminal(Boolean(request.tty) && Boolean(process.stdin.isTTY));
  const stop = shutdownSignal();
  const onStop = (): void => ws.close(1000, 'the client stopped');
  stop.signal.addEventListener('abort', onStop, { once: true });
  try {
    return await new Promise<ExecResult>((resolve, reject) => {
      let ended: ExecResult | AppError | undefined;
      ws.on('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          reject(
            errorFromAnswer(
              res.statusCode ?? 0,
              Buffer.concat(chunks).toString('utf8'),
              Boolean(client.target.token),
            ),
          ),
        );
      });
      ws.on('error', (e) => reject(ended instanceof AppError ? ended : unreachable(url, e)));
      ws.on('open', () => {
        ws.send(JSON.stringify(request));
        terminal.start({
          input: (data) => ws.send(frame(Channel.stdin, data)),
          eof: () => ws.send(frame(Channel.stdinEnd)),
          resize: () => ws.send(frame(Channel.resize, JSON.stringify(windowSize()))),
        });
      });
      ws.on('message', (data: Buffer, isBinary) => {
        if (!isBinary || data.length === 0) return;
        const payload = data.subarray(1);
        if (data[0] === Channel.stdout || data[0] === Channel.stderr) {
          const stream = data[0] === Channel.stdout ? 'stdout' : 'stderr';
          process[stream].write(payload);
          shown[stream] += payload.length;
        } else if (data[0] === Channel.exit) ended = parseExit(payload);
      });
      ws.on('close', (code, reason) => {
        if (stop.signal.aborted && ended === undefined)
          return reject(new AppError('CANCELLED', 'cancelled: the shell was closed from here'));
        if (ended instanceof AppError) return reject(ended);
        if (ended) return resolve(ended);
        reject(closeError(code, reason.toString('utf8')));
      });
    });
  } finally {
    terminal.stop();
    stop.dispose();
    ws.terminate();
  }
}

interface TerminalHooks {
  input(data: Buffer): void;
  eof(): void;
  resize(): void;
}

/**
 * This process's stdin and window, wired to the remote side: raw mode on a terminal (restored by
 * stop(), and on exit whatever happens), stdin chunks and its end, and SIGWINCH.
 */
function localTerminal(raw: boolean): { start(hooks: TerminalHooks): void; stop(): void } {
  let hooks: TerminalHooks | undefined;
  const onData = (data: Buffer): void => hooks?.input(data);
  const onEnd = (): void => hooks?.eof();
  const onResize = (): void => hooks?.resize();
  const restore = (): void => {
    if (raw && process.stdin.isTTY) process.stdin.setRawMode(false);
  };
  return {
    start(h) {
      hooks = h;
      if (raw) {
        process.stdin.setRawMode(true);
        process.once('exit', restore);
      }
      process.stdin.on('data', onData);
      process.stdin.once('end', onEnd);
      process.on('SIGWINCH', onResize);
      process.stdin.resume();
    },
    stop() {
      hooks = undefined;
      process.stdin.off('data', onData);
      process.stdin.off('end', onEnd);
      process.off('SIGWINCH', onResize);
      process.stdin.pause();
      restore();
      process.off('exit', restore);
    },
  };
}
