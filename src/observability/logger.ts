/**
 * Structured JSON logs. Secrets, env values and user code are redacted as a backstop; callers log
 * sizes and digests of user data, never the data itself. In stdio MCP mode logs go to stderr
 * because stdout is the protocol channel.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

export const REDACT_PATHS = [
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'req.headers.authorization',
  'headers.authorization',
  'env',
  '*.env',
  'request.code',
  'request.stdin',
  'request.files[*].content',
  'arguments.code',
  'arguments.code_string',
  'arguments.stdin',
  'auth.token',
  'auth.tokens',
];

export interface LoggerOptions {
  level: string;
  /** 1 = stdout, 2 = stderr. */
  fd?: 1 | 2;
  name?: string;
}

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: { svc: options.name ?? 'sandpit' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ fd: options.fd ?? 2, sync: true }),
  );
}

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
