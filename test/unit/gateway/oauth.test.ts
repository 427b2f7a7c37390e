/**
 * The OAuth resource server's pure parts, with a local JWKS: a token's claims as a principal
 * (iss#sub, the mapped claims, scopes template:<name>, the defaults), the namespace claim held to
 * the configured list, the metadata paths, and the static-or-JWT choice of the authenticator.
 * test/e2e/oauth.test.ts runs the whole flow against a real authorization server.
 */
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT, type JSONWebKeySet } from 'jose';
import { createAuthenticator } from '../../../src/gateway/auth.js';
import { createOAuthVerifier, type OAuthOptions } from '../../../src/gateway/oauth.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { isAppError } from '../../../src/shared/errors.js';

const ISSUER = 'https://id.example.com';
const AUDIENCE = 'https://sandpit.example.com/mcp';
let keys: JSONWebKeySet;
let sign: (claims: Record<string, unknown>) => Promise<string>;

before(async () => {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  keys = { keys: [{ ...(await exportJWK(publicKey)), kid: 'k', alg: 'ES256' }] };
  sign = (claims) =>
    new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'alice', scope: 'sandpit', ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: 'k' })
      .setExpirationTime('5m')
      .sign(privateKey);
});

function options(overrides: Partial<OAuthOptions> = {}): OAuthOptions {
  return {
    issuer: ISSUER,
    audience: AUDIENCE,
    jwks: { keys },
    requiredScopes: ['sandpit'],
    claims: {
      templates: 'sandpit_templates',
      images: 'sandpit_images',
      maxConcurrentRuns: 'sandpit_max_concurrent_runs',
      maxSessions: 'sandpit_max_sessions',
      namespace: 'sandpit_namespace',
    },
    defaults: {},
    namespaces: ['team-a'],
    clockToleranceSeconds: 0,
    ...overrides,
  };
}

test('metadata: RFC 9728 fields, served at the path-inserted URL and the root', () => {
  const v = createOAuthVerifier(options());
  assert.deepEqual(v.metadataPaths, [
    '/.well-known/oauth-protected-resource/mcp',
    '/.well-known/oauth-protected-resource',
  ]);
  assert.equal(v.metadataUrl, 'https://sandpit.example.com/.well-known/oauth-protected-resource/mcp');
  assert.equal(v.metadata.resource, AUDIENCE);
  assert.deepEqual(v.metadata.authorization_servers, [ISSUER]);
});

test('the principal is iss#sub with the mapped claims; the defaults fill the rest', async () => {
  const v = createOAuthVerifier(options({ defaults: { maxSessions: 3, runsPerMinute: 10 } }));
  const p = await v.verify(
    await sign({
      sandpit_templates: ['python'],
      sandpit_max_concurrent_runs: 2,
      sandpit_namespace: 'team-a',
    }),
  );
  assert.deepEqual(p, {
    id: `${ISSUER}#alice`,
    name: `${ISSUER}#alice`,
    scope: { templates: ['python'] },
    maxConcurrentRuns: 2,
    maxSessions: 3,
    namespace: 'team-a',
    runsPerMinute: 10,
  });
});

test('scopes template:<name> grant templates; scp lists count as scopes', async () => {
  const v = createOAuthVerifier(options());
  const p = await v.verify(await sign({ scope: undefined, scp: ['sandpit', 'template:bash', 'template:c'] }));
  assert.deepEqual(p.scope, { templates: ['bash', 'c'] });
});

test('refusals: a namespace not configured, a malformed claim, a missing scope', async () => {
  const v = createOAuthVerifier(options());
  const refused = async (claims: Record<string, unknown>, code: string, message: RegExp) =>
    assert.rejects(v.verify(await sign(claims)), (e: unknown) => {
      assert.ok(isAppError(e) && e.code === code, String(e));
      assert.match(e.message, message);
      return true;
    });
  await refused(
    { sandpit_namespace: 'team-b' },
    'FORBIDDEN',
    /namespace "team-b" is not one this gateway serves/,
  );
  await refused({ sandpit_max_sessions: -1 }, 'UNAUTHORIZED', /claim sandpit_max_sessions is not valid/);
  await refused({ scope: 'other' }, 'FORBIDDEN', /lacks the scope sandpit/);
});

test('the authenticator: a static token first, a JWT through OAuth, anything else refused', async () => {
  const auth = createAuthenticator(
    { tokens: [{ name: 'ci', token: 'ci-token-123' }] },
    LOCAL_PRINCIPAL,
    createOAuthVerifier(options()),
  );
  assert.equal(auth.required, true);
  assert.equal((await auth.verify('Bearer ci-token-123')).name, 'ci');
  assert.equal((await auth.verify(`Bearer ${await sign({})}`)).id, `${ISSUER}#alice`);
  await assert.rejects(auth.verify('Bearer nope'), /the bearer token is not valid/);
  await assert.rejects(auth.verify(undefined), /missing Authorization header/);
});
