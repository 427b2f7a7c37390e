/**
 * Errors from the apiserver, mapped once: an ApiException (whose body is a JSON *string* in
 * client-node 1.x), a failed watch or log request (an Error with `statusCode`), an in-stream watch
 * ERROR (a metav1.Status) or a network failure becomes a KubeApiError, an AppError that also keeps
 * the HTTP status and the Status reason (`NotFound`, `AlreadyExists`, `Conflict`, `Forbidden`, …).
 * Every NotFound, AlreadyExists, Conflict and Gone check in sandpit is one of the predicates below.
 */
import { ApiException } from '@kubernetes/client-node';
import { AppError, type ErrorCode } from '../shared/errors.js';

export interface KubeApiErrorDetails {
  code: ErrorCode;
  /** HTTP status; 0 when the apiserver was not reached. */
  status: number;
  /** metav1.Status reason, e.g. AlreadyExists; '' when unknown. */
  reason: string;
  cause?: unknown;
}

export class KubeApiError extends AppError {
  readonly status: number;
  readonly reason: string;

  constructor(message: string, details: KubeApiErrorDetails) {
    super(details.code, message, { cause: details.cause });
    this.name = 'KubeApiError';
    this.status = details.status;
    this.reason = details.reason;
  }
}

/** The fields of a metav1.Status that sandpit reads. */
export interface StatusBody {
  code?: number;
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

function apiError(what: string, status: number, body: StatusBody, cause: unknown): KubeApiError {
  return new KubeApiError(`${what}: ${body.message ?? `HTTP ${status}`}`, {
    code: codeFor(status),
    status,
    reason: body.reason ?? '',
    cause,
  });
}

/** An in-stream watch ERROR event (its object is a metav1.Status). */
export function statusError(status: StatusBody, what: string): KubeApiError {
  return apiError(what, status.code ?? 0, { ...status, message: status.message ?? 'watch error' }, status);
}

/** Wraps anything a client-node call threw; `what` names the call (`create Pod ns/x`). */
export function toKubeError(e: unknown, what: string): KubeApiError {
  if (e instanceof KubeApiError) return e;
  if (e instanceof ApiException) {
    const status = (e as ApiException<unknown>).code;
    return apiError(what, status, parseStatusBody((e as ApiException<unknown>).body), e);
  }
  const statusCode = (e as { statusCode?: unknown } | null)?.statusCode;
  const status = typeof statusCode === 'number' ? statusCode : 0;
  return apiError(what, status, { message: messageOf(e) }, e);
}

/** What went wrong, also for what is not an Error (a WebSocket's ErrorEvent carries a message). */
function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message;
  const message = (e as { message?: unknown } | null)?.message;
  return typeof message === 'string' && message !== '' ? message : String(e);
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

/** The call's result, or undefined when the apiserver says there is no such object (404). */
export async function unlessNotFound<T>(call: Promise<T>): Promise<T | undefined> {
  try {
    return await call;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}
