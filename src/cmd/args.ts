/**
 * Tiny argv helpers over node:util parseArgs, so every command has --help and typed options; and
 * the flags several commands share, turned into request fields (a count, NAME=VALUE, limits, stdin).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AppError } from '../shared/errors.js';

export type Options = NonNullable<ParseArgsConfig['options']>;

export function parse<O extends Options>(argv: string[], options: O, usage: string) {
  try {
    return parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    throw new AppError('INVALID_REQUEST', (e as Error).message, { hint: `see the usage below\n\n${usage}` });
  }
}

export function printHelp(usage: string): void {
  process.stdout.write(`${usage.trim()}\n`);
}

/** argv split at the first `--`: the options and positionals before it, and the command after it. */
export function splitAtDashDash(argv: string[]): { own: string[]; command: string[] | undefined } {
  const at = argv.indexOf('--');
  return at >= 0
    ? { own: argv.slice(0, at), command: argv.slice(at + 1) }
    : { own: argv, command: undefined };
}

export function toInt(flag: string, text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0)
    throw new AppError('INVALID_REQUEST', `${flag} expects a positive whole number, got "${text}"`);
  return n;
}

export function envInput(spec: string, flag = '--env'): { name: string; value: string } {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw new AppError('INVALID_REQUEST', `${flag} expects NAME=VALUE, got "${spec}"`);
  return { name: spec.slice(0, eq), value: spec.slice(eq + 1) };
}

/** The limit flags (--memory, --cpus, --pids, and --workspace where a command has it) as `resources`. */
export function resourcesOf(values: {
  memory?: string | undefined;
  cpus?: string | undefined;
  pids?: string | undefined;
  workspace?: string | undefined;
}): { memory?: string; cpu?: string; pids?: number; ephemeralStorage?: string } {
  return {
    ...(values.memory !== undefined ? { memory: values.memory } : {}),
    ...(values.cpus !== undefined ? { cpu: values.cpus } : {}),
    ...(values.pids !== undefined ? { pids: toInt('--pids', values.pids) } : {}),
    ...(values.workspace !== undefined ? { ephemeralStorage: values.workspace } : {}),
  };
}

/** This process's stdin as text, unless it is a terminal (then nobody is piping anything in). */
export async function readStdin(): Promise<string | undefined> {
  if (process.stdin.isTTY) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
