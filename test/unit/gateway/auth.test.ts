import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import {
  authInfoFor,
  createAuthenticator,
  DEFAULT_TOKEN_PRINCIPAL,
  principalFromAuthInfo,
  wwwAuthenticate,
} from '../../../src/gateway/auth.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { AppError } from '../../../src/shared/errors.js';

const hex = (s: string): string => createHash('sha256').update(s).digest('hex');
const idOf = (token: string): string => `token:${hex(token).slice(0, 16)}`;

function refused(fn: () => unknown): AppError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof AppError);
    assert.equal(e.code, 'UNAUTHORIZED');
    assert.equal(e.httpStatus, 401);
    return e;
  }
  assert.fail('expected UNAUTHORIZED');
}

test('without tokens nothing is required and every caller is the anonymous principal', () => {
  const auth = createAuthenticator({ tokens: [] }, LOCAL_PRINCIPAL);
  assert.equal(auth.required, false);
  assert.equal(auth.authenticate(undefined), LOCAL_PRINCIPAL);
  assert.equal(auth.authenticate('Bearer whatever'), LOCAL_PRINCIPAL);
});

test('auth.token (MCP_AUTH_TOKEN) maps to the default principal with the whole policy', () => {
  const auth = createAuthenticator({ token: 's3cret-token', tokens: [] }, LOCAL_PRINCIPAL);
  assert.equal(auth.required, true);
  const want = { id: idOf('s3cret-token'), name: DEFAULT_TOKEN_PRINCIPAL, scope: {} };
  assert.deepEqual(auth.authenticate('Bearer s3cret-token'), want);
  assert.deepEqual(auth.authenticate('bearer   s3cret-token  '), want);
});

test('listed tokens carry their scopes and concurrency; tokenSha256 matches the digest', () => {
  const auth = createAuthenticator(
    {
      tokens: [
        {
          name: 'ci',
          token: 'ci-token-123',
          templates: ['bash', 'python'],
          images: ['sandpit/bash:5'],
          maxConcurrentRuns: 2,
        },
        { name: 'ops', tokenSha256: hex('ops-token-456') },
      ],
    },
    LOCAL_PRINCIPAL,
  );
  assert.deepEqual(auth.authenticate('Bearer ci-token-123'), {
    id: idOf('ci-token-123'),
    name: 'ci',
    scope: { templates: ['bash', 'python'], images: ['sandpit/bash:5'] },
    maxConcurrentRuns: 2,
  });
  assert.deepEqual(auth.authenticate('Bearer ops-token-456'), {
    id: idOf('ops-token-456'),
    name: 'ops',
    scope: {},
  });
  refused(() => auth.authenticate(`Bearer ${hex('ops-token-456')}`)); // the digest itself is not a token
});

test("a token's namespace is its principal's (its tenant on Kubernetes); none when it sets none", () => {
  const auth = createAuthenticator(
    {
      tokens: [
        { name: 'a', token: 'team-a-token', namespace: 'team-a' },
        { name: 'b', token: 'team-b-token' },
      ],
    },
    LOCAL_PRINCIPAL,
  );
  assert.equal(auth.authenticate('Bearer team-a-token').namespace, 'team-a');
  assert.equal('namespace' in auth.authenticate('Bearer team-b-token'), false);
});

test('missing, malformed and wrong credentials are refused with a hint', () => {
  const auth = createAuthenticator({ token: 's3cret-token', tokens: [] }, LOCAL_PRINCIPAL);
  assert.match(refused(() => auth.authenticate(undefined)).message, /missing Authorization header/);
  assert.match(
    refused(() => auth.authenticate('Basic czNjcmV0')).message,
    /expected "Authorization: Bearer <token>"/,
  );
  assert.match(refused(() => auth.authenticate('Bearer s3cret-tokenX')).message, /not valid/);
  assert.match(refused(() => auth.authenticate('Bearer')).hint ?? '', /Authorization: Bearer <token>/);
});

test('WWW-Authenticate: a bare challenge without credentials, invalid_token with wrong ones', () => {
  const err = new AppError('UNAUTHORIZED', 'the bearer token is not valid');
  assert.equal(wwwAuthenticate(undefined, err), 'Bearer realm="sandpit"');
  assert.equal(
    wwwAuthenticate('Bearer x', err),
    'Bearer realm="sandpit", error="invalid_token", error_description="the bearer token is not valid"',
  );
  assert.doesNotMatch(
    wwwAuthenticate('Bearer x', new AppError('UNAUTHORIZED', 'a "quoted" \\ value')),
    /\\|"quoted"/,
  );
});

test('a principal rides on AuthInfo without the raw token', () => {
  const principal = { id: 'token:0123456789abcdef', name: 'ci', scope: { templates: ['bash'] } };
  const info = authInfoFor(principal);
  assert.equal(info.token, '[redacted]');
  assert.equal(principalFromAuthInfo(info), principal);
  assert.equal(principalFromAuthInfo(undefined), undefined);
  assert.equal(principalFromAuthInfo({ extra: { principal: 'nope' } }), undefined);
});

test('a principal is known by its token, never by its name: two tokens named alike are two principals', () => {
  const auth = createAuthenticator(
    { token: 'admin-token-1', tokens: [{ name: 'default', token: 'scoped-token-2', templates: ['bash'] }] },
    LOCAL_PRINCIPAL,
  );
  const admin = auth.authenticate('Bearer admin-token-1');
  const scoped = auth.authenticate('Bearer scoped-token-2');
  assert.equal(admin.name, scoped.name);
  assert.notEqual(admin.id, scoped.id);
  assert.equal(admin.id, idOf('admin-token-1'));
  assert.doesNotMatch(admin.id, /admin-token-1/);
});
