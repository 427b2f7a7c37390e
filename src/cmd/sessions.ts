/**
 * `sandpit sessions create|ls|exec|cp|shell|logs|rm`: a REST client of a running `sandpit serve`,
 * where sessions live (a session outlives one CLI invocation). This file dispatches, holds the
 * options every subcommand shares, and the small subcommands; exec, cp and shell have their own.
 */
import {
  ExecLogSchema,
  ExecResultSchema,
  SessionSchema,
  type ExecLogEntry,
  type Session,
} from '../api/session.js';
import { isSessionEnded } from '../api/session.js';
import { argvText } from '../observability/audit.js';
import { AppError, isAppError } from '../shared/errors.js';
import * as z from 'zod';
import { envInput, parse, printHelp, resourcesOf, toInt } from './args.js';
import { sessionPath } from './gateway-client.js';
import { reportError } from './process.js';
import { clientOf, GATEWAY_HELP, GATEWAY_OPTIONS, printJson, usageError } from './session-flags.js';
import { table } from './table.js';

export const SESSIONS_USAGE = `
usage: sandpit sessions <command> [options]

A session is a sandbox that lives across commands, with its files. Sessions live in a running
\`sandpit serve\` gateway; these commands are its REST client (the same API as curl's).

commands:
  create   start a session and print its id         ID=$(sandpit sessions create -t python)
  ls       your sessions, live and recently ended   sandpit sessions ls
  exec     run a command, output streamed live      sandpit sessions exec $ID -- python app.py
  cp       copy files and directories in or out     sandpit sessions cp app.py $ID:
  shell    an interactive terminal in the session   sandpit sessions shell $ID
  logs     the exec history with outputs            sandpit sessions logs $ID
  rm       end sessions, removing their sandboxes   sandpit sessions rm $ID

Run \`sandpit sessions <command> --help\` for its options.
${GATEWAY_HELP}

exit codes: 0 done; exec and shell pass the command's own on (124 timed out, 130 cancelled);
64 bad usage or request; 66 no such session (or file); 69 the gateway cannot be reached;
75 busy (a cap on sessions or execs); 77 the token was refused or policy denied it; 70 other errors.
`;

type Subcommand = (argv: string[]) => Promise<number>;

const SUBCOMMANDS: Record<string, () => Promise<Subcommand>> = {
  create: () => Promise.resolve(createCommand),
  ls: () => Promise.resolve(lsCommand),
  logs: () => Promise.resolve(logsCommand),
  rm: () => Promise.resolve(rmCommand),
  exec: async () => (await import('./session-exec.js')).execCommand,
  cp: async () => (await import('./session-cp.js')).cpCommand,
  shell: async () => (await import('./session-shell.js')).shellCommand,
};
const ALIASES: Record<string, string> = { list: 'ls', delete: 'rm' };

export async function sessionsCommand(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    printHelp(SESSIONS_USAGE);
    return name === undefined ? 64 : 0;
  }
  const load = SUBCOMMANDS[ALIASES[name] ?? name];
  if (!load) {
    throw new AppError('INVALID_REQUEST', `unknown sessions command "${name}"`, {
      hint: `one of ${Object.keys(SUBCOMMANDS).join(', ')}; see \`sandpit sessions --help\``,
    });
  }
  return (await load())(rest);
}

const print = (text: string): void => void process.stdout.write(text);

// --- create ---------------------------------------------------------------------------------

export const CREATE_USAGE = `
usage: sandpit sessions create [--template NAME | --image REF] [options]

Starts a session and prints its id (with --json, the session). It ends on \`sandpit sessions rm\`,
at its --ttl, after --idle-timeout without an exec or file operation, or if its sandbox fails.

  ID=$(sandpit sessions create --template python --ttl 1800)
  sandpit sessions create --image python:3.11 --timeout 30       the seed's {"image", "timeout"}

options:
  -t, --template NAME     python, python-data, node, bash, c or rust
      --image REF         image override; must be in the allowlist
      --ttl SECONDS       whole lifetime (default 3600, at most sessions.maxTtlSeconds)
      --idle-timeout SECONDS   ends after this long without activity (default 600)
      --timeout SECONDS   default deadline of each exec
  -e, --env NAME=VALUE    environment variable of every exec (repeatable)
      --secret NAME[=VALUE]   like --env, but never shown, logged or audited; without =VALUE the value
                          is this process's variable NAME (so it stays off the command line)
      --memory SIZE       memory limit, e.g. 256m
      --cpus N            CPU limit, e.g. 0.5
      --pids N            process limit
      --workspace SIZE    size of the writable workspace, e.g. 256Mi
      --runtime NAME      container runtime, e.g. runsc (gVisor)
${GATEWAY_HELP}
`;

const CREATE_OPTIONS = {
  ...GATEWAY_OPTIONS,
  template: { type: 'string', short: 't' },
  image: { type: 'string' },
  ttl: { type: 'string' },
  'idle-timeout': { type: 'string' },
  timeout: { type: 'string' },
  env: { type: 'string', short: 'e', multiple: true },
  secret: { type: 'string', multiple: true },
  memory: { type: 'string' },
  cpus: { type: 'string' },
  pids: { type: 'string' },
  workspace: { type: 'string' },
  runtime: { type: 'string' },
} as const;

type CreateValues = ReturnType<typeof parse<typeof CREATE_OPTIONS>>['values'];

/** The POST /sessions body the flags ask for (the gateway validates it; this only shapes it). */
export function createBody(
  values: CreateValues,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, unknown> {
  const resources = resourcesOf(values);
  const seconds = (flag: string, text: string | undefined) =>
    text === undefined ? undefined : toInt(flag, text);
  const body: Record<string, unknown> = {
    template: values.template,
    image: values.image,
    runtime: values.runtime,
    ttlSeconds: seconds('--ttl', values.ttl),
    idleTimeoutSeconds: seconds('--idle-timeout', values['idle-timeout']),
    timeoutSeconds: seconds('--timeout', values.timeout),
    resources: Object.keys(resources).length ? resources : undefined,
    env: values.env?.map((spec) => envInput(spec)),
    secrets: values.secret?.map((spec) => secretInput(spec, env)),
  };
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
}

function secretInput(spec: string, env: Readonly<Record<string, string | undefined>>) {
  if (spec.includes('=')) return envInput(spec, '--secret');
  const value = env[spec];
  if (value === undefined) {
    throw new AppError('INVALID_REQUEST', `--secret ${spec}: no variable ${spec} in this environment`, {
      hint: `export ${spec} first, or give --secret ${spec}=VALUE`,
    });
  }
  return { name: spec, value };
}

async function createCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, CREATE_OPTIONS, CREATE_USAGE);
  if (values.help) return (printHelp(CREATE_USAGE), 0);
  noPositionals(positionals, 'create');
  const body = createBody(values, process.env);
  const session = await clientOf(values).json(SessionSchema, 'POST', 'sessions', { json: body });
  if (values.json) printJson(session);
  else print(`${session.id}\n`);
  return 0;
}

// --- ls -------------------------------------------------------------------------------------

export const LS_USAGE = `
usage: sandpit sessions ls [options]

Your sessions (those of the token), live and recently ended, as a table or (--json) as GET
/sessions answers: {"sessions": [...]}.
${GATEWAY_HELP}
`;

/** A span of time as kubectl shows an age: 45s, 12m, 5h, 3d. */
export function span(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h${s < 36_000 ? `${Math.floor((s % 3600) / 60)}m` : ''}`;
  return `${Math.floor(s / 86_400)}d`;
}

/** When a live session ends if nothing else happens: its TTL, or its idle timeout if sooner. */
function expires(s: Session, now: number): string {
  if (isSessionEnded(s.state)) return '-';
  const ttl = Date.parse(s.expiresAt);
  const idle = Date.parse(s.idleExpiresAt);
  return idle < ttl ? `in ${span(idle - now)} (idle)` : `in ${span(ttl - now)}`;
}

export function sessionTable(sessions: readonly Session[], now: number): string {
  return table([
    ['ID', 'STATE', 'TEMPLATE', 'AGE', 'EXPIRES', 'EXECS'],
    ...sessions.map((s) => [
      s.id,
      isSessionEnded(s.state) && s.reason ? `${s.state} (${s.reason})` : s.state,
      s.template ?? s.image,
      span(now - Date.parse(s.createdAt)),
      expires(s, now),
      String(s.execs),
    ]),
  ]);
}

const SessionListSchema = z.object({ sessions: z.array(SessionSchema) });

async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, GATEWAY_OPTIONS, LS_USAGE);
  if (values.help) return (printHelp(LS_USAGE), 0);
  noPositionals(positionals, 'ls');
  const list = await clientOf(values).json(SessionListSchema, 'GET', 'sessions');
  if (values.json) printJson(list);
  else print(list.sessions.length ? sessionTable(list.sessions, Date.now()) : 'no sessions\n');
  return 0;
}

// --- logs -----------------------------------------------------------------------------------

export const LOGS_USAGE = `
usage: sandpit sessions logs ID [EXEC_ID] [options]

The session's exec history, oldest first (the last 100 execs, or 1 MiB of output): a line per exec
(its id, command, how it ended), then its stdout on stdout and its stderr on stderr. With EXEC_ID,
that one exec, also while it runs in the background (its output so far). --json prints GET
/sessions/ID/logs ({"execs": [...]}) or, with EXEC_ID, the exec's result.
${GATEWAY_HELP}
`;

/** The line that introduces an exec in `logs`. */
export function execHeading(entry: ExecLogEntry): string {
  const r = entry.result;
  const ending =
    r.phase === 'Running'
      ? 'running'
      : `${r.exitCode !== null ? `exit ${r.exitCode}` : 'no exit code'} (${r.reason ? `${r.phase}/${r.reason}` : r.phase})`;
  const at = r.finishedAt ?? r.createdAt;
  const parts = [
    entry.execId,
    ...(entry.argv.length ? [`$ ${argvText(entry.argv)}`] : []),
    ending,
    `${Math.round(r.durationMs)}ms`,
    ...(entry.background ? ['background'] : []),
    ...(at ? [at] : []),
  ];
  return `== ${parts.join('  ')}\n`;
}

const withNewline = (text: string): string => (text && !text.endsWith('\n') ? `${text}\n` : text);

function printExec(entry: ExecLogEntry): void {
  print(execHeading(entry));
  print(withNewline(entry.result.stdout));
  process.stderr.write(withNewline(entry.result.stderr));
}

async function logsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, GATEWAY_OPTIONS, LOGS_USAGE);
  if (values.help) return (printHelp(LOGS_USAGE), 0);
  const [id, execId, ...extra] = positionals;
  if (id === undefined || extra.length) throw usageError('logs takes ID and at most one EXEC_ID', 'logs');
  const client = clientOf(values);
  if (execId !== undefined) {
    const result = await client.json(
      ExecResultSchema,
      'GET',
      sessionPath(id, 'exec', encodeURIComponent(execId)),
    );
    if (values.json) printJson(result);
    else printExec({ execId, argv: [], background: result.phase === 'Running', result });
    return 0;
  }
  const log = await client.json(ExecLogSchema, 'GET', sessionPath(id, 'logs'));
  if (values.json) printJson(log);
  else if (log.execs.length === 0) process.stderr.write(`no execs in ${id} yet\n`);
  else log.execs.forEach(printExec);
  return 0;
}

// --- rm -------------------------------------------------------------------------------------

export const RM_USAGE = `
usage: sandpit sessions rm ID [ID...] [options]

Ends each session and removes its sandbox (its files and processes go with it); prints each id as
it goes (with --json, {"sessions": [...]} as each ended). An id that fails is reported and the
others are still removed; the exit code is then the first failure's.
${GATEWAY_HELP}
`;

async function rmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, GATEWAY_OPTIONS, RM_USAGE);
  if (values.help) return (printHelp(RM_USAGE), 0);
  if (positionals.length === 0) throw usageError('rm takes at least one session ID', 'rm');
  const client = clientOf(values);
  const ended: Session[] = [];
  let code = 0;
  for (const id of positionals) {
    try {
      const session = await client.json(SessionSchema, 'DELETE', sessionPath(id));
      ended.push(session);
      if (!values.json) print(`${session.id}\n`);
    } catch (e) {
      // A gateway that cannot be reached fails them all alike: say it once.
      if (isAppError(e) && e.code === 'GATEWAY_UNAVAILABLE') throw e;
      const failed = reportError(e);
      code ||= failed;
    }
  }
  if (values.json) printJson({ sessions: ended });
  return code;
}

// --- shared ---------------------------------------------------------------------------------

function noPositionals(positionals: string[], command: string): void {
  if (positionals.length) throw usageError(`unexpected argument "${positionals[0]}"`, command);
}
