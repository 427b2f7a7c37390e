/**
 * Errors from the apiserver, mapped once: an ApiException (whose body is a JSON *string* in
 * client-node 1.x) or a network failure becomes a KubeApiError, an AppError that also keeps the
 * HTTP status and the Status reason (`NotFound`, `AlreadyExists`, `Conflict`, `Forbidden`, …).
 */
import { ApiException } from '@kubernetes/client-node';
import { AppError, type ErrorCode } from '../shared/errors.js';

export class KubeApiError extends AppError {
  /** HTTP status; 0 when the apiserver was not reached. */
  readonly status: number;
  /** metav1.Status reason, e.g. AlreadyExists; '' when unknown. */
  readonly reason: string;

  constructor(code: ErrorCode, message: string, status: number, reason: string, cause: unknown) {
    super(code, message, { cause });
    this.name = 'KubeApiError';
    this.status = status;
    this.reason = reason;
  }
}

interface StatusBody {
  message?: string;
  reason?: string;
}

function parseStatusBody(body: unknown): StatusBody {
  if (typeof body === 'object' && body !== null) return body;
  if (typeof body !== 'string' || body === '') return {};
  try {
    const parsed = JSON.parse(body) as unknown;
    return typeof parsed === 'object' && parsed !== null ? parsed : {};
  } catch {
    return { message: body.slice(0, 500) };
  }
}

function codeFor(status: number): ErrorCode {
  if (status === 400 || status === 422) return 'INVALID_REQUEST';
  if (status === 401) return 'UNAUTHORIZED';
  if (status === 403) return 'FORBIDDEN';
  if (status === 404) return 'NOT_FOUND';
  if (status === 0 || status === 429 || status >= 500) return 'ENGINE_UNAVAILABLE';
  return 'BACKEND_ERROR';
}

/** Wraps anything a client-node call threw; `what` names the call (`create Pod ns/x`). */
export function toKubeError(e: unknown, what: string): KubeApiError {
  if (e instanceof KubeApiError) return e;
  if (e instanceof ApiException) {
    const status = (e as ApiException<unknown>).code;
    const body = parseStatusBody((e as ApiException<unknown>).body);
    const detail = body.message ?? `HTTP ${status}`;
    return new KubeApiError(codeFor(status), `${what}: ${detail}`, status, body.reason ?? '', e);
  }
  const statusCode = (e as { statusCode?: unknown } | null)?.statusCode;
  const status = typeof statusCode === 'number' ? statusCode : 0;
  const message = e instanceof Error ? e.message : String(e);
  return new KubeApiError(codeFor(status), `${what}: ${message}`, status, '', e);
}

export const isNotFound = (e: unknown): boolean => e instanceof KubeApiError && e.status === 404;
export const isAlreadyExists = (e: unknown): boolean =>
  e instanceof KubeApiError && e.status === 409 && e.reason === 'AlreadyExists';
export const isConflict = (e: unknown): boolean =>
  e instanceof KubeApiError && e.status === 409 && e.reason !== 'AlreadyExists';
export const isGone = (e: unknown): boolean => e instanceof KubeApiError && e.status === 410;
export const isForbidden = (e: unknown): boolean => e instanceof KubeApiError && e.status === 403;

/** Runs a client-node call and maps its failure. */
export async function kubeCall<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    throw toKubeError(e, what);
  }
}
