/**
 * A real OAuth 2.1 authorization server for tests: oidc-provider 9 on 127.0.0.1, with dynamic
 * client registration, client credentials, and resource indicators (so that its access tokens are
 * JWTs whose aud is the resource asked for, RFC 8707). Its interaction policy approves the test
 * account at once: a headless "browser" (authorizeHeadless) follows the authorize URL to the
 * redirect with the code. It signs with a key the test holds too, so that a test can mint the
 * tokens no real server would issue (another issuer).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import Provider from 'oidc-provider';

export const TEST_ACCOUNT = 'test-user';
export const MACHINE = { clientId: 'machine', clientSecret: 'machine-secret-0123456789abcdef' };
/** A client whose tokens live one second. */
export const SHORT_LIVED = { clientId: 'short-lived', clientSecret: 'short-lived-secret-0123456789ab' };

export interface AuthorizationServer {
  issuer: string;
  jwksUrl: string;
  /** Signs a token with the server's own key (for claims the server would never issue). */
  sign(claims: Record<string, unknown>, options?: { expiresIn?: string }): Promise<string>;
  /** Signs with another key under the server's key id: a token whose signature does not verify. */
  signWithOtherKey(claims: Record<string, unknown>): Promise<string>;
  /** A client-credentials token from the token endpoint, for `resource` and `scope`. */
  clientCredentials(
    client: { clientId: string; clientSecret: string },
    resource: string,
    scope?: string,
  ): Promise<string>;
  close(): Promise<void>;
}

const KID = 'test-key';
type SigningKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

export async function startAuthorizationServer(scopes: string[]): Promise<AuthorizationServer> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const other = await generateKeyPair('ES256', { extractable: true });
  const jwk: JWK = { ...(await exportJWK(privateKey)), kid: KID, alg: 'ES256', use: 'sig' };
  const http: Server = createServer();
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const machine = (c: { clientId: string; clientSecret: string }) => ({
    client_id: c.clientId,
    client_secret: c.clientSecret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
  });
  const provider = new Provider(issuer, {
    clients: [machine(MACHINE), machine(SHORT_LIVED)],
    jwks: { keys: [jwk] },
    // Its one key is an EC key: ID tokens are signed with it too.
    clientDefaults: { id_token_signed_response_alg: 'ES256' },
    cookies: { keys: ['test-cookie-key-0123456789'] },
    findAccount: (_ctx: unknown, sub: string) => ({ accountId: sub, claims: () => ({ sub }) }),
    scopes: ['openid', 'offline_access', ...scopes],
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx: unknown, _client: unknown, oneOf?: string | string[]) => oneOf,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string, client: { clientId: string }) => ({
          scope: scopes.join(' '),
          audience: resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: client.clientId === SHORT_LIVED.clientId ? 1 : 600,
          jwt: { sign: { alg: 'ES256' } },
        }),
      },
    },
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
  });
  provider.use(async (ctx, next) => {
    if (!ctx.path.startsWith('/interaction/')) return next();
    ctx.respond = false;
    await approve(provider, ctx.req, ctx.res);
  });
  http.on('request', provider.callback());
  const sign = (key: SigningKey, claims: Record<string, unknown>, expiresIn = '10m') =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: KID, typ: 'at+jwt' })
      .setIssuedAt()
      .setExpirationTime(expiresIn)
      .sign(key);
  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    sign: (claims, options) => sign(privateKey, claims, options?.expiresIn),
    signWithOtherKey: (claims) => sign(other.privateKey, claims),
    async clientCredentials(client, resource, scope) {
      const body = new URLSearchParams({ grant_type: 'client_credentials', resource });
      if (scope !== undefined) body.set('scope', scope);
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          Authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}`,
        },
        body,
      });
      const json = (await res.json()) as { access_token?: string };
      if (!res.ok || !json.access_token)
        throw new Error(`token endpoint: ${res.status} ${JSON.stringify(json)}`);
      return json.access_token;
    },
    close: () => new Promise<void>((r) => http.close(() => r())),
  };
}

/** The interaction policy's one answer: the test account logs in and grants what was asked. */
async function approve(
  provider: Provider,
  req: Parameters<Provider['interactionDetails']>[0],
  res: Parameters<Provider['interactionDetails']>[1],
): Promise<void> {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'login') {
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: TEST_ACCOUNT } },
      {
        mergeWithLastSubmission: false,
      },
    );
    return;
  }
  const grant = new provider.Grant({ accountId: TEST_ACCOUNT, clientId: details.params.client_id });
  for (const scope of details.prompt.details.missingOIDCScope ?? []) grant.addOIDCScope(scope);
  for (const [resource, scopes] of Object.entries(details.prompt.details.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

/**
 * A browser without a screen: follows the authorize URL's redirects (keeping cookies, as the
 * interaction needs) until one goes to `redirectUri`, and returns that redirect's code.
 */
export async function authorizeHeadless(url: URL, redirectUri: string): Promise<string> {
  const cookies = new Map<string, string>();
  let next = url.toString();
  for (let hop = 0; hop < 20; hop++) {
    if (next.startsWith(redirectUri)) {
      const code = new URL(next).searchParams.get('code');
      if (!code) throw new Error(`redirected without a code: ${next}`);
      return code;
    }
    const res = await fetch(next, {
      redirect: 'manual',
      headers: { Cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair!.indexOf('=');
      cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
    const location = res.headers.get('location');
    if (!location) throw new Error(`authorize stopped at ${next}: ${res.status} ${await res.text()}`);
    await res.body?.cancel();
    next = new URL(location, next).toString();
  }
  throw new Error('too many redirects');
}
