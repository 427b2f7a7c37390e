import type * as z from 'zod';
import { AppError, type Violation } from '../shared/errors.js';

/** Zod issues as violations: one per issue, named by its dotted field path. */
export function issuesToViolations(issues: readonly z.core.$ZodIssue[]): Violation[] {
  return issues.map((issue) => ({
    field: issue.path.length ? issue.path.map(String).join('.') : '(request)',
    message: issue.message,
  }));
}

/** Parses untrusted input, or throws INVALID_REQUEST naming every bad field at once. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what = 'request'): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const violations = issuesToViolations(result.error.issues);
  return invalid(what, violations);
}

function invalid(what: string, violations: Violation[]): never {
  throw new AppError(
    'INVALID_REQUEST',
    `invalid ${what}: ${violations.map((v) => `${v.field}: ${v.message}`).join('; ')}`,
    {
      violations,
      hint: 'fix the named fields and send the request again',
    },
  );
}
