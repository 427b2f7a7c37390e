/**
 * `sandpit sessions exec ID -- ARGV` (or `--shell 'CMD'`): one command in a session, its output
 * streamed as the gateway's NDJSON events arrive, its exit code passed on. Ctrl-C drops the
 * request, which kills a foreground exec; `--background` prints the exec id and leaves it running.
 */
import { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { ExecEventSchema, ExecResultSchema, type ExecResult } from '../api/session.js';
import { AppError } from '../shared/errors.js';
import { envInput, parse, printHelp, readStdin, splitAtDashDash, toInt } from './args.js';
import { sessionPath, type GatewayClient } from './gateway-client.js';
import { exitCodeOf, printEnding } from './output.js';
import { shutdownSignal } from './process.js';
import {
  clientOf,
  GATEWAY_HELP,
  GATEWAY_OPTIONS,
  printJson,
  sessionIdOf,
  usageError,
} from './session-flags.js';

export const EXEC_USAGE = `
usage: sandpit sessions exec ID [options] -- ARGV...
       sandpit sessions exec ID [options] --shell 'COMMAND LINE'

Runs a command in the session and exits with its exit code. Its output streams as it is written
(stdout to stdout, stderr to stderr); this process's stdin is passed in when it is not a terminal.
Ctrl-C (or the end of this command) kills a foreground exec.

  sandpit sessions exec $ID -- python script.py
  sandpit sessions exec $ID --shell 'make && ./app > out.txt'
  sandpit sessions exec $ID --background -- python train.py     prints its exec id at once
  sandpit sessions logs $ID EXEC_ID                              its output so far, or its result

options:
      --shell CMD         a shell command line, run with /bin/sh -c
  -e, --env NAME=VALUE    variable for this exec (repeatable), over the session's
      --cwd DIR           working directory inside the workspace (default: the workspace)
      --timeout SECONDS   deadline (default: the session's --timeout; never above the ceiling)
      --background        start it, print its exec id and return; it runs on
      --no-stdin          do not pass this process's stdin in
${GATEWAY_HELP.replace("print the gateway's answer as JSON", 'print the exec result (ExecResult) as JSON')}

exit codes: the command's own; 124 timed out; 130 cancelled; and those of \`sandpit sessions --help\`.
`;

const EXEC_OPTIONS = {
  ...GATEWAY_OPTIONS,
  shell: { type: 'string' },
  env: { type: 'string', short: 'e', multiple: true },
  cwd: { type: 'string' },
  timeout: { type: 'string' },
  background: { type: 'boolean' },
  'no-stdin': { type: 'boolean' },
} as const;

type ExecValues = ReturnType<typeof parse<typeof EXEC_OPTIONS>>['values'];

/** The POST /sessions/ID/exec body: exactly one of the argv after `--` and --shell. */
export function execBody(
  values: ExecValues,
  command: string[] | undefined,
  stdin: string | undefined,
): Record<string, unknown> {
  if (command !== undefined && values.shell !== undefined)
    throw usageError('give either -- ARGV or --shell, not both', 'exec');
  if (values.shell === undefined && !command?.length)
    throw usageError('nothing to run: give the command after -- (or a command line with --shell)', 'exec');
  const body: Record<string, unknown> = {
    ...(values.shell !== undefined ? { shell: values.shell } : { command }),
    ...(values.env ? { env: values.env.map((spec) => envInput(spec)) } : {}),
    ...(values.cwd !== undefined ? { cwd: values.cwd } : {}),
    ...(values.timeout !== undefined ? { timeoutSeconds: toInt('--timeout', values.timeout) } : {}),
    ...(values.background ? { background: true } : {}),
    ...(stdin ? { stdin } : {}),
  };
  return body;
}

export async function execCommand(argv: string[]): Promise<number> {
  const { own, command } = splitAtDashDash(argv);
  const { values, positionals } = parse(own, EXEC_OPTIONS, EXEC_USAGE);
  if (values.help) return (printHelp(EXEC_USAGE), 0);
  const id = sessionIdOf(positionals, 'exec');
  execBody(values, command, undefined); // bad usage is told before stdin is read
  const body = execBody(values, command, values['no-stdin'] ? undefined : await readStdin());
  const client = clientOf(values);
  if (!values.background && !values.json) return streamExec(client, id, body);
  const result = await client.json(ExecResultSchema, 'POST', sessionPath(id, 'exec'), { json: body });
  if (values.json) printJson(result);
  else process.stdout.write(`${result.execId}\n`);
  return values.background ? 0 : exitCodeOf(result);
}

async function streamExec(client: GatewayClient, id: string, body: Record<string, unknown>): Promise<number> {
  const stop = shutdownSignal();
  try {
    const res = await client.call('POST', sessionPath(id, 'exec'), {
      json: body,
      headers: { Accept: 'application/x-ndjson' },
      signal: stop.signal,
    });
    const shown = { stdout: 0, stderr: 0 };
    const result = await readEvents(res, (stream, text) => {
      (stream === 'stdout' ? process.stdout : process.stderr).write(text);
      shown[stream] += Buffer.byteLength(text);
    });
    if (!result) {
      throw new AppError('BACKEND_ERROR', `the gateway ended the exec's stream without its result`, {
        hint: `its result may be in \`sandpit sessions logs ${id}\``,
      });
    }
    printEnding(result, shown);
    return exitCodeOf(result);
  } catch (e) {
    if (!stop.signal.aborted) throw e;
    process.stderr.write('sandpit: cancelled: the exec was killed\n');
    return 130;
  } finally {
    stop.dispose();
  }
}

/** The events of a streamed exec, output handed on as it comes; resolves with the result event's. */
async function readEvents(
  res: Response,
  onOutput: (stream: 'stdout' | 'stderr', text: string) => void,
): Promise<ExecResult | undefined> {
  if (!res.body) return undefined;
  const lines = createInterface({
    input: Readable.fromWeb(res.body as WebReadableStream<Uint8Array>),
    crlfDelay: Infinity,
  });
  let result: ExecResult | undefined;
  try {
    for await (const line of lines) {
      if (!line.trim()) continue;
      const event = ExecEventSchema.safeParse(jsonOrUndefined(line));
      if (!event.success) {
        throw new AppError('BACKEND_ERROR', 'the gateway sent an exec event this CLI does not understand', {
          hint: 'is --url a sandpit gateway of this version? `sandpit --version` and GET /health tell',
        });
      }
      if (event.data.event === 'output') onOutput(event.data.stream, event.data.text);
      else if (event.data.event === 'result') result = ExecResultSchema.parse(event.data);
    }
  } catch (e) {
    if (e instanceof AppError || (e as Error).name === 'AbortError') throw e;
    throw new AppError(
      'BACKEND_ERROR',
      `the connection to the gateway broke during the exec (${(e as Error).message})`,
      {
        hint: 'the exec was killed if the gateway saw it; `sandpit sessions logs ID` has what finished',
        cause: e,
      },
    );
  }
  return result;
}

function jsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
