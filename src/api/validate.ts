import type * as z from 'zod';
import { AppError, type Violation } from '../shared/errors.js';

/** Zod issues as violations: one per issue, named by its dotted field path. */
export function issuesToViolations(issues: readonly z.core.$ZodIssue[]): Violation[] {
  return issues.map((issue) => ({
    field: issue.path.length ? issue.path.map(String).join('.') : '(request)',
    message: issue.message,
  }));
}

/** How deep a request's JSON may nest: every request sandpit takes is a few levels deep. */
export const MAX_INPUT_DEPTH = 32;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * What no schema checks but every consumer relies on: text that is well-formed Unicode (a lone
 * surrogate, `"\ud800"` in JSON, would reach the sandbox silently replaced by U+FFFD), and
 * nesting no deeper than MAX_INPUT_DEPTH (a deeper value overflows the stack of whatever walks it
 * next). Walked without recursion, so that the check cannot overflow itself. The first problem per
 * field is reported.
 */
export function unsafeJsonViolations(input: unknown): Violation[] {
  const violations: Violation[] = [];
  const stack: { value: unknown; path: string[] }[] = [{ value: input, path: [] }];
  const field = (path: string[]): string => (path.length ? path.join('.') : '(request)');
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === 'string') {
      const at = LONE_SURROGATE.exec(value);
      if (at) {
        const unit = at[0].charCodeAt(0).toString(16).toUpperCase();
        violations.push({
          field: field(path),
          message: `is not well-formed Unicode: a lone surrogate (U+${unit}) at character ${at.index}; send bytes that are not text as base64 (a file with encoding: base64)`,
        });
      }
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (path.length >= MAX_INPUT_DEPTH) {
      violations.push({ field: field(path), message: `nests deeper than ${MAX_INPUT_DEPTH} levels` });
      continue;
    }
    for (const [key, child] of Object.entries(value)) {
      if (LONE_SURROGATE.test(key))
        violations.push({ field: field(path), message: 'has a key that is not well-formed Unicode' });
      else stack.push({ value: child, path: [...path, key] });
    }
  }
  return violations;
}

/** Parses untrusted input, or throws INVALID_REQUEST naming every bad field at once. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what = 'request'): z.infer<S> {
  const unsafe = unsafeJsonViolations(input);
  if (unsafe.length > 0) return invalid(what, unsafe);
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
