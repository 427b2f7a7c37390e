/**
 * The CLI's client of a running `sandpit serve`, where sessions live: which gateway (`--url`,
 * SANDPIT_URL, else the address `sandpit serve` binds by the same config), which token (`--token`,
 * else the config's auth.token, which MCP_AUTH_TOKEN sets), and REST calls whose refusals come back
 * as the AppError the gateway named, so that they print and exit like the CLI's own errors. The
 * token goes into the Authorization header and nowhere else.
 */
import type * as z from 'zod';
import { ErrorBodySchema } from '../api/error.js';
import type { Config } from '../config/schema.js';
import { AppError, ErrorCodes, type ErrorCode } from '../shared/errors.js';

export interface GatewayTarget {
  /** The gateway's base URL (a path prefix, if any, is kept). */
  url: URL;
  token: string | undefined;
}

/** Where `sandpit serve` listens by `server` (a wildcard address is reached on loopback). */
export function defaultGatewayUrl(server: Pick<Config['server'], 'host' | 'port'>): string {
  if (server.port === 0) {
    throw new AppError('INVALID_REQUEST', 'server.port is 0 (a free port): the gateway address is unknown', {
      hint: 'give the address `sandpit serve` printed with --url or SANDPIT_URL',
    });
  }
  const host = server.host === '0.0.0.0' ? '127.0.0.1' : server.host === '::' ? '::1' : server.host;
  return `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${server.port}`;
}

/** A gateway URL as given: http(s) only, no query or credentials in it. */
export function parseGatewayUrl(text: string, from: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new AppError('INVALID_REQUEST', `${from} expects a URL like http://127.0.0.1:8080, got "${text}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new AppError(
      'INVALID_REQUEST',
      `${from} expects an http:// or https:// URL, got "${url.protocol}"`,
    );
  if (url.username || url.password || url.search)
    throw new AppError('INVALID_REQUEST', `${from} takes no credentials or query`, {
      hint: 'give the token with --token or MCP_AUTH_TOKEN',
    });
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

/** The target from the flags, the environment and the config, in that order. */
export function gatewayTarget(
  flags: { url?: string | undefined; token?: string | undefined },
  env: Readonly<Record<string, string | undefined>>,
  config: Pick<Config, 'server' | 'auth'>,
): GatewayTarget {
  const url =
    flags.url !== undefined
      ? parseGatewayUrl(flags.url, '--url')
      : env.SANDPIT_URL
        ? parseGatewayUrl(env.SANDPIT_URL, 'SANDPIT_URL')
        : parseGatewayUrl(defaultGatewayUrl(config.server), 'server.host/server.port');
  return { url, token: flags.token ?? config.auth.token };
}

const STATUS_CODES: Record<number, ErrorCode> = {
  400: 'INVALID_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  413: 'TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'BUSY',
  501: 'UNSUPPORTED',
};

/** The error code an HTTP status stands for, when the answer does not name one. */
export const codeForStatus = (status: number): ErrorCode => STATUS_CODES[status] ?? 'BACKEND_ERROR';

const isErrorCode = (code: string): code is ErrorCode => Object.hasOwn(ErrorCodes, code);

/** A refusal as the gateway put it (`{error: {code, message, hint}}`), or as its status says. */
export function errorFromAnswer(status: number, body: string, hadToken: boolean): AppError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    parsed = undefined;
  }
  const answer = ErrorBodySchema.safeParse(parsed);
  const fallback = codeForStatus(status);
  if (!answer.success) return new AppError(fallback, `the gateway answered HTTP ${status}`);
  const { code, message, hint, violations } = answer.data.error;
  const noToken =
    status === 401 && !hadToken
      ? 'this gateway wants a token: set MCP_AUTH_TOKEN (or auth.token in the config), or pass --token'
      : undefined;
  return new AppError(isErrorCode(code) ? code : fallback, message, {
    hint: noToken ?? hint,
    violations: violations ?? [],
  });
}

/** fetch's own failure (nothing answered) as GATEWAY_UNAVAILABLE, naming the address and the fix. */
export function unreachable(url: URL, e: unknown): AppError {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  const why = cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
  return new AppError('GATEWAY_UNAVAILABLE', `cannot reach the sandpit gateway at ${url.origin} (${why})`, {
    hint: 'sessions live in a running gateway: start one with `sandpit serve`, or point --url (SANDPIT_URL) at it',
    cause: e,
  });
}

export interface CallOptions {
  query?: Record<string, string | undefined>;
  headers?: Record<string, string>;
  /** A JSON body (sent as application/json). */
  json?: unknown;
  /** A raw body, streamed. */
  stream?: ReadableStream<Uint8Array>;
  signal?: AbortSignal | undefined;
}

export class GatewayClient {
  readonly target: GatewayTarget;

  constructor(target: GatewayTarget) {
    this.target = target;
  }

  /** `path` (e.g. `sessions/ses-1/files/a.txt`, each segment encoded by the caller) under the base URL. */
  urlOf(path: string, query: Record<string, string | undefined> = {}): URL {
    const url = new URL(path, this.target.url);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
    return url;
  }

  authHeaders(): Record<string, string> {
    return this.target.token ? { Authorization: `Bearer ${this.target.token}` } : {};
  }

  /** A call whose answer is 2xx, else the gateway's error thrown as an AppError. */
  async call(method: string, path: string, options: CallOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { ...this.authHeaders(), ...options.headers };
    let body: string | ReadableStream<Uint8Array> | undefined;
    if (options.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(options.json);
    } else if (options.stream) {
      headers['Content-Type'] ??= 'application/octet-stream';
      body = options.stream;
    }
    let res: Response;
    try {
      res = await fetch(this.urlOf(path, options.query), {
        method,
        headers,
        body,
        signal: options.signal ?? null,
        // A streamed body needs it (undici); it changes nothing for the others.
        ...(options.stream ? { duplex: 'half' } : {}),
      });
    } catch (e) {
      if (options.signal?.aborted) throw e;
      throw unreachable(this.target.url, e);
    }
    if (!res.ok) throw errorFromAnswer(res.status, await res.text(), Boolean(this.target.token));
    return res;
  }

  /** A JSON call whose answer `schema` parses (a gateway that answers otherwise is a BACKEND_ERROR). */
  async json<S extends z.ZodType>(
    schema: S,
    method: string,
    path: string,
    options: CallOptions = {},
  ): Promise<z.infer<S>> {
    const res = await this.call(method, path, options);
    const parsed = schema.safeParse(await res.json().catch(() => undefined));
    if (!parsed.success) {
      throw new AppError(
        'BACKEND_ERROR',
        `the gateway's answer to ${method} /${path} is not what it documents`,
        {
          hint: 'is --url a sandpit gateway of this version? `sandpit --version` and GET /health tell',
          cause: parsed.error,
        },
      );
    }
    return parsed.data;
  }
}

/** `sessions/<id>` with the id encoded, and a workspace path with each segment encoded. */
export const sessionPath = (id: string, ...rest: string[]): string =>
  ['sessions', encodeURIComponent(id), ...rest].join('/');

export const encodePath = (path: string): string => path.split('/').map(encodeURIComponent).join('/');
