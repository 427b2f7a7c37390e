/**
 * Bearer tokens → principals. Static tokens come from config (`auth.token` / MCP_AUTH_TOKEN, and
 * the `auth.tokens` list with scopes); only their sha256 digests are kept, and a presented token is
 * compared against every digest in constant time. With `auth.oauth`, a JWT access token is
 * verified as oauth.ts says, beside them.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { toEntry, type EgressEntryInput } from '../api/egress.js';
import { DEFAULT_TOKEN_PRINCIPAL } from '../api/principals.js';
import { AppError } from '../shared/errors.js';
import { looksLikeJwt, type OAuthVerifier } from './oauth.js';
import type { Principal } from './principal.js';

/** A configured token and what it allows (config `auth.tokens[]`). */
export interface TokenSpec {
  name: string;
  token?: string | undefined;
  tokenSha256?: string | undefined;
  templates?: readonly string[] | undefined;
  images?: readonly string[] | undefined;
  maxConcurrentRuns?: number | undefined;
  runsPerMinute?: number | undefined;
  outputBytesPerMinute?: number | undefined;
  maxSessions?: number | undefined;
  /** Kubernetes: the token's tenant namespace. */
  namespace?: string | undefined;
  /** The most its sandboxes may reach, within the config's ceiling. */
  egress?: readonly EgressEntryInput[] | undefined;
}

export interface AuthConfig {
  token?: string | undefined;
  tokens: readonly TokenSpec[];
}

export interface Authenticator {
  /** True when at least one token (or OAuth) is configured: every request must then present one. */
  readonly required: boolean;
  /** The OAuth resource server, when configured. */
  readonly oauth: OAuthVerifier | undefined;
  /** The principal of a static token in an `Authorization` header value; throws UNAUTHORIZED otherwise. */
  authenticate(authorization: string | undefined): Principal;
  /**
   * The principal of a static token or, with OAuth, of a JWT access token; throws UNAUTHORIZED
   * (invalid_token), FORBIDDEN (insufficient_scope) or AUTH_UNAVAILABLE otherwise.
   */
  verify(authorization: string | undefined): Promise<Principal>;
  /** The `WWW-Authenticate` value of a refusal (401, or 403 insufficient_scope). */
  challenge(authorization: string | undefined, err: AppError): string;
}

export { DEFAULT_TOKEN_PRINCIPAL };

interface Entry {
  digest: Buffer;
  principal: Principal;
}

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** A token's stable identity: the start of its digest (which config may hold anyway, as tokenSha256). */
export function principalId(digest: Buffer): string {
  return `token:${digest.toString('hex').slice(0, 16)}`;
}

/** The digest a token entry is known by. */
export function tokenDigest(t: Pick<TokenSpec, 'token' | 'tokenSha256'>): Buffer {
  return t.tokenSha256 !== undefined ? Buffer.from(t.tokenSha256, 'hex') : sha256(t.token ?? '');
}

export function createAuthenticator(
  config: AuthConfig,
  anonymous: Principal,
  oauth?: OAuthVerifier,
): Authenticator {
  const entries: Entry[] = [];
  if (config.token !== undefined) {
    const digest = sha256(config.token);
    entries.push({
      digest,
      principal: { id: principalId(digest), name: DEFAULT_TOKEN_PRINCIPAL, scope: {} },
    });
  }
  for (const t of config.tokens) {
    const digest = tokenDigest(t);
    entries.push({ digest, principal: principalOf(t, principalId(digest)) });
  }
  const required = entries.length > 0 || oauth !== undefined;
  const authenticate = (authorization: string | undefined): Principal => {
    if (!required) return anonymous;
    const token = bearerToken(authorization);
    const presented = sha256(token);
    let found: Principal | undefined;
    // Every entry is compared, so the time taken does not depend on which one matched.
    for (const entry of entries) {
      if (timingSafeEqual(entry.digest, presented) && !found) found = entry.principal;
    }
    if (!found) throw unauthorized('the bearer token is not valid');
    return found;
  };
  return {
    required,
    oauth,
    authenticate,
    async verify(authorization) {
      if (!oauth) return authenticate(authorization);
      const token = bearerToken(authorization);
      try {
        return authenticate(authorization);
      } catch (e) {
        // Not a static token: a JWT is an access token, anything else is refused as one would be.
        if (looksLikeJwt(token)) return oauth.verify(token);
        throw e;
      }
    },
    challenge(authorization, err) {
      return oauth ? oauthChallenge(oauth, authorization, err) : wwwAuthenticate(authorization, err);
    },
  };
}

/** RFC 6750 §3 with RFC 9728 §5.1's resource_metadata, and the scope a client should ask for. */
function oauthChallenge(oauth: OAuthVerifier, authorization: string | undefined, err: AppError): string {
  const parts = ['Bearer realm="sandpit"'];
  if (err.code === 'FORBIDDEN') parts.push('error="insufficient_scope"');
  else if (authorization) parts.push('error="invalid_token"');
  if (authorization) parts.push(`error_description="${quotable(err.message)}"`);
  if (oauth.requiredScopes.length) parts.push(`scope="${oauth.requiredScopes.join(' ')}"`);
  parts.push(`resource_metadata="${oauth.metadataUrl}"`);
  return parts.join(', ');
}

function quotable(text: string): string {
  return text.replace(/["\\]/g, '');
}

function principalOf(t: TokenSpec, id: string): Principal {
  return {
    id,
    name: t.name,
    scope: {
      ...(t.templates ? { templates: t.templates } : {}),
      ...(t.images ? { images: t.images } : {}),
      ...(t.egress ? { egress: t.egress.map(toEntry) } : {}),
    },
    ...(t.maxConcurrentRuns !== undefined ? { maxConcurrentRuns: t.maxConcurrentRuns } : {}),
    ...(t.runsPerMinute !== undefined ? { runsPerMinute: t.runsPerMinute } : {}),
    ...(t.outputBytesPerMinute !== undefined ? { outputBytesPerMinute: t.outputBytesPerMinute } : {}),
    ...(t.maxSessions !== undefined ? { maxSessions: t.maxSessions } : {}),
    ...(t.namespace !== undefined ? { namespace: t.namespace } : {}),
  };
}

function bearerToken(authorization: string | undefined): string {
  if (!authorization) throw unauthorized('missing Authorization header');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw unauthorized('expected "Authorization: Bearer <token>"');
  return match[1]!;
}

export function unauthorized(message: string): AppError {
  return new AppError('UNAUTHORIZED', message, {
    hint: 'send "Authorization: Bearer <token>" with a token from the server configuration',
  });
}

/**
 * The `WWW-Authenticate` value for a 401 (RFC 6750 §3): no error code when the request carried no
 * credentials, `invalid_token` when it carried wrong ones.
 */
export function wwwAuthenticate(authorization: string | undefined, err: AppError): string {
  if (!authorization) return 'Bearer realm="sandpit"';
  return `Bearer realm="sandpit", error="invalid_token", error_description="${quotable(err.message)}"`;
}

/**
 * How a principal rides on the MCP SDK's `AuthInfo` (`req.auth` → `extra.authInfo`). The raw token
 * is not carried along: nothing downstream needs it.
 */
export interface PrincipalAuthInfo {
  token: string;
  clientId: string;
  scopes: string[];
  extra: { principal: Principal };
}

export function authInfoFor(principal: Principal): PrincipalAuthInfo {
  return { token: '[redacted]', clientId: principal.id, scopes: [], extra: { principal } };
}

export function principalFromAuthInfo(
  authInfo: { extra?: Record<string, unknown> } | undefined,
): Principal | undefined {
  const principal = authInfo?.extra?.principal as Principal | undefined;
  return principal && typeof principal.id === 'string' ? principal : undefined;
}
