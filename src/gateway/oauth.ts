/**
 * The gateway as an OAuth 2.1 resource server (the MCP authorization spec): JWT access tokens,
 * verified with `jose` against the issuer's JWKS for signature, issuer, audience (the gateway's
 * canonical MCP URL, RFC 8707), expiry and the required scopes; its Protected Resource Metadata
 * (RFC 9728); and the `WWW-Authenticate` challenges that point clients at it. A token's principal
 * is `iss#sub`, and its claims map onto a static token's scope.
 */
import { createLocalJWKSet, createRemoteJWKSet, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import * as z from 'zod';
import { AppError } from '../shared/errors.js';
import type { Principal } from './principal.js';

/** Which claim holds each field of a principal's scope. */
export interface ClaimNames {
  templates: string;
  images: string;
  maxConcurrentRuns: string;
  maxSessions: string;
  namespace: string;
}

/** What an OAuth principal is allowed when its token carries no claim for it (config `auth.oauth.defaults`). */
export interface OAuthDefaults {
  templates?: readonly string[] | undefined;
  images?: readonly string[] | undefined;
  maxConcurrentRuns?: number | undefined;
  maxSessions?: number | undefined;
  runsPerMinute?: number | undefined;
  outputBytesPerMinute?: number | undefined;
}

export interface OAuthOptions {
  issuer: string;
  /** The gateway's canonical MCP URL (`resource`): every token's `aud` must hold it. */
  audience: string;
  /** The issuer's keys: fetched from a URL (cached, refetched for an unknown key id), or given. */
  jwks: { url: string } | { keys: JSONWebKeySet };
  /** Scopes every token must carry; without one: 403 insufficient_scope. */
  requiredScopes: readonly string[];
  claims: ClaimNames;
  defaults: OAuthDefaults;
  /** Namespaces a token's namespace claim may name (Kubernetes); any other is refused. */
  namespaces: readonly string[];
  /** Seconds of clock skew tolerated on exp and nbf. */
  clockToleranceSeconds: number;
}

/** RFC 9728 §2: what a client learns about this resource before it asks for a token. */
export interface ProtectedResourceMetadata {
  resource: string;
  authorization_servers: string[];
  scopes_supported: string[];
  bearer_methods_supported: string[];
  resource_name: string;
}

export interface OAuthVerifier {
  readonly metadata: ProtectedResourceMetadata;
  /** Where the metadata is served: RFC 9728's path-inserted form, and the root form. */
  readonly metadataPaths: readonly string[];
  /** The URL `WWW-Authenticate`'s resource_metadata names. */
  readonly metadataUrl: string;
  readonly requiredScopes: readonly string[];
  /** The principal of a valid token; UNAUTHORIZED (invalid_token) or FORBIDDEN (insufficient_scope) otherwise. */
  verify(token: string): Promise<Principal>;
}

/** Asymmetric algorithms only: a shared secret in a JWKS would let anyone who reads it mint tokens. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
const WELL_KNOWN = '/.well-known/oauth-protected-resource';

/** A compact JWS: three base64url parts. Anything else is a static token. */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
}

export function createOAuthVerifier(options: OAuthOptions): OAuthVerifier {
  const keys =
    'url' in options.jwks
      ? createRemoteJWKSet(new URL(options.jwks.url), { timeoutDuration: 5000 })
      : createLocalJWKSet(options.jwks.keys);
  const resource = new URL(options.audience);
  const path = resource.pathname.replace(/\/$/, '');
  const metadataPaths = path ? [`${WELL_KNOWN}${path}`, WELL_KNOWN] : [WELL_KNOWN];
  return {
    metadata: {
      resource: options.audience,
      authorization_servers: [options.issuer],
      scopes_supported: [...options.requiredScopes],
      bearer_methods_supported: ['header'],
      resource_name: 'sandpit',
    },
    metadataPaths,
    metadataUrl: `${resource.origin}${metadataPaths[0]}`,
    requiredScopes: options.requiredScopes,
    async verify(token) {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer: options.issuer,
          audience: options.audience,
          algorithms: ALGORITHMS,
          requiredClaims: ['exp', 'sub'],
          clockTolerance: options.clockToleranceSeconds,
        }));
      } catch (e) {
        throw refusal(e, options);
      }
      const scopes = scopesOf(payload);
      const missing = options.requiredScopes.filter((s) => !scopes.includes(s));
      if (missing.length) throw insufficientScope(missing);
      return principalOf(payload, scopes, options);
    },
  };
}

/** `scope` (RFC 9068: space-separated) or `scp` (a list, as some issuers write it). */
function scopesOf(payload: JWTPayload): string[] {
  if (typeof payload.scope === 'string') return payload.scope.split(' ').filter(Boolean);
  if (Array.isArray(payload.scp)) return payload.scp.filter((s): s is string => typeof s === 'string');
  return [];
}

const names = z.array(z.string().min(1).max(253)).max(256);
const count = z.number().int().min(1).max(100_000);
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The token's claims as a principal: each mapped claim when present, else the configured default. */
function principalOf(payload: JWTPayload, scopes: string[], options: OAuthOptions): Principal {
  const { claims, defaults } = options;
  const id = `${payload.iss}#${payload.sub}`;
  const claim = <T>(name: string, schema: z.ZodType<T>): T | undefined => {
    const value = payload[name];
    if (value === undefined) return undefined;
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw invalidToken(`the claim ${name} is not valid here`);
    return parsed.data;
  };
  const scopeTemplates = scopes.filter((s) => s.startsWith('template:')).map((s) => s.slice(9));
  const templates =
    claim(claims.templates, names) ?? (scopeTemplates.length ? scopeTemplates : defaults.templates);
  const images = claim(claims.images, names) ?? defaults.images;
  const maxConcurrentRuns = claim(claims.maxConcurrentRuns, count) ?? defaults.maxConcurrentRuns;
  const maxSessions = claim(claims.maxSessions, count) ?? defaults.maxSessions;
  const namespace = claim(claims.namespace, z.string().regex(NAMESPACE));
  if (namespace !== undefined && !options.namespaces.includes(namespace)) {
    throw new AppError('FORBIDDEN', `the token's namespace "${namespace}" is not one this gateway serves`, {
      hint: 'auth.oauth.namespaces lists the namespaces a token may name',
    });
  }
  return {
    id,
    name: id,
    scope: { ...(templates ? { templates } : {}), ...(images ? { images } : {}) },
    ...(maxConcurrentRuns !== undefined ? { maxConcurrentRuns } : {}),
    ...(maxSessions !== undefined ? { maxSessions } : {}),
    ...(namespace !== undefined ? { namespace } : {}),
    ...(defaults.runsPerMinute !== undefined ? { runsPerMinute: defaults.runsPerMinute } : {}),
    ...(defaults.outputBytesPerMinute !== undefined
      ? { outputBytesPerMinute: defaults.outputBytesPerMinute }
      : {}),
  };
}

/** jose's failures as RFC 6750 refusals: what was wrong, never the token. */
function refusal(e: unknown, options: OAuthOptions): AppError {
  const { code, claim } = e as { code?: string; claim?: string };
  switch (code ?? '') {
    case 'ERR_JWT_EXPIRED':
      return invalidToken('the access token has expired');
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if (claim === 'aud') return invalidToken(`the access token was not issued for ${options.audience}`);
      if (claim === 'iss') return invalidToken(`the access token was not issued by ${options.issuer}`);
      return invalidToken(`the access token's ${claim ?? 'claims'} claim is not valid`);
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return invalidToken("the access token's signature does not verify");
    case 'ERR_JWKS_NO_MATCHING_KEY':
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return invalidToken("the access token is not signed with a key of the issuer's JWKS");
    case 'ERR_JWKS_TIMEOUT':
    case 'ERR_JWKS_INVALID':
      return new AppError('AUTH_UNAVAILABLE', "the issuer's keys (JWKS) could not be read", {
        cause: e,
        hint: 'retry later; the server log says why',
      });
    default:
      if (e instanceof TypeError) {
        return new AppError('AUTH_UNAVAILABLE', "the issuer's keys (JWKS) could not be read", { cause: e });
      }
      return invalidToken('the access token is not a valid JWT');
  }
}

export function invalidToken(message: string): AppError {
  return new AppError('UNAUTHORIZED', message, {
    hint: 'get a new access token from the authorization server in the resource metadata',
  });
}

function insufficientScope(missing: string[]): AppError {
  return new AppError('FORBIDDEN', `the access token lacks the scope ${missing.join(' ')}`, {
    violations: [{ field: 'scope', message: 'missing', limit: missing.join(' ') }],
    hint: `ask the authorization server for scope "${missing.join(' ')}"`,
  });
}
