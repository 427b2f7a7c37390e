/** The REST API's error body: every refusal and failure answers `{ error: {code, message, hint, violations} }`. */
import * as z from 'zod';

export const ErrorBodySchema = z.object({
  error: z.object({
    code: z.string().describe('INVALID_REQUEST, POLICY_DENIED, NOT_FOUND, BUSY, …'),
    message: z.string(),
    hint: z.string().optional().describe('What to do about it'),
    violations: z
      .array(
        z.object({
          field: z.string(),
          message: z.string(),
          limit: z.union([z.string(), z.number()]).optional(),
        }),
      )
      .optional(),
    retryAfterSeconds: z
      .number()
      .int()
      .optional()
      .describe('A rate limit refused it: the seconds until the same request is allowed (also Retry-After)'),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;
