/** Tiny argv helpers over node:util parseArgs, so every command has --help and typed options. */
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
