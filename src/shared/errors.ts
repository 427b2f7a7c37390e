/**
 * The one error type that crosses layers. Each boundary (CLI, MCP, HTTP, controller status) maps
 * `AppError.code` exactly once; nothing downstream inspects messages.
 */
export const ErrorCodes = {
  // `exit` follows sysexits.h so the CLI's own failures stand apart from a program's exit code.
  INVALID_REQUEST: { http: 400, exit: 64, retryable: false },
  POLICY_DENIED: { http: 403, exit: 77, retryable: false },
  UNAUTHORIZED: { http: 401, exit: 77, retryable: false },
  FORBIDDEN: { http: 403, exit: 77, retryable: false },
  NOT_FOUND: { http: 404, exit: 66, retryable: false },
  // A request that cannot be carried out as sent beside what exists (another request under a used idempotency key).
  CONFLICT: { http: 409, exit: 65, retryable: false },
  TOO_LARGE: { http: 413, exit: 64, retryable: false },
  UNSUPPORTED_MEDIA_TYPE: { http: 415, exit: 64, retryable: false },
  BUSY: { http: 429, exit: 75, retryable: true },
  CANCELLED: { http: 409, exit: 130, retryable: false },
  CONFIG_INVALID: { http: 500, exit: 78, retryable: false },
  ENGINE_UNAVAILABLE: { http: 503, exit: 69, retryable: true },
  IMAGE_NOT_FOUND: { http: 503, exit: 69, retryable: false },
  RUNTIME_NOT_FOUND: { http: 503, exit: 69, retryable: false },
  IMAGE_OUTDATED: { http: 503, exit: 69, retryable: false },
  BACKEND_ERROR: { http: 502, exit: 70, retryable: true },
  // The CLI cannot reach the sandpit gateway it is a client of (`sandpit sessions`).
  GATEWAY_UNAVAILABLE: { http: 502, exit: 69, retryable: true },
  // The backend does not offer it (sessions on a backend without them).
  UNSUPPORTED: { http: 501, exit: 69, retryable: false },
  // EX_IOERR: the audit file cannot be written, so nothing runs until it can.
  AUDIT_UNAVAILABLE: { http: 503, exit: 74, retryable: true },
  // An OAuth access token cannot be checked now: the issuer's keys cannot be fetched.
  AUTH_UNAVAILABLE: { http: 503, exit: 69, retryable: true },
  INTERNAL: { http: 500, exit: 70, retryable: false },
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/** One reason a request was refused, naming the field and the limit it broke. */
export interface Violation {
  field: string;
  message: string;
  limit?: string | number;
  requested?: string | number;
}

export interface AppErrorOptions {
  hint?: string;
  violations?: Violation[];
  /** A rate limit's refusal: when the same request would be allowed (HTTP Retry-After). */
  retryAfterSeconds?: number;
  cause?: unknown;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  readonly violations: Violation[];
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.hint = options.hint;
    this.violations = options.violations ?? [];
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get httpStatus(): number {
    return ErrorCodes[this.code].http;
  }

  get exitCode(): number {
    return ErrorCodes[this.code].exit;
  }

  get retryable(): boolean {
    return ErrorCodes[this.code].retryable;
  }

  toJSON(): {
    code: ErrorCode;
    message: string;
    hint?: string;
    violations?: Violation[];
    retryAfterSeconds?: number;
  } {
    return {
      code: this.code,
      message: this.message,
      ...(this.hint ? { hint: this.hint } : {}),
      ...(this.violations.length ? { violations: this.violations } : {}),
      ...(this.retryAfterSeconds !== undefined ? { retryAfterSeconds: this.retryAfterSeconds } : {}),
    };
  }
}

export function isAppError(e: unknown): e is AppError {
  return e instanceof AppError;
}

/** Wraps anything thrown into an AppError without losing an AppError's own code. */
export function toAppError(e: unknown, fallback: ErrorCode = 'INTERNAL'): AppError {
  if (e instanceof AppError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new AppError(fallback, message, { cause: e });
}

export function policyDenied(violations: Violation[]): AppError {
  const summary = violations.map((v) => `${v.field}: ${v.message}`).join('; ');
  return new AppError('POLICY_DENIED', `request denied by policy: ${summary}`, {
    violations,
    hint: 'change the named fields to fit within the limits, or ask the operator to raise them',
  });
}

/** The one "too many at once" error (slots, quotas): retryable, saying which limit was reached. */
export function busy(message: string, options: Omit<AppErrorOptions, 'violations'> = {}): AppError {
  return new AppError('BUSY', `busy, retry later: ${message}`, {
    hint: 'wait a moment and send the request again',
    ...options,
  });
}
