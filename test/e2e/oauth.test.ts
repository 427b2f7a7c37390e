/**
 * The built CLI's `serve` as an OAuth 2.1 resource server, with oidc-provider 9 on 127.0.0.1 as
 * the real authorization server: the Protected Resource Metadata, the SDK client's authorization
 * code flow with PKCE (headless) and its ClientCredentialsProvider, each running code through the
 * gateway; every refusal (wrong audience, expired, wrong issuer, bad signature, missing scope) with
 * its status and WWW-Authenticate; a static token beside OAuth.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { requireDocker } from '../support/docker.js';
import {
  authorizeHeadless,
  MACHINE,
  SHORT_LIVED,
  startAuthorizationServer,
  TEST_ACCOUNT,
  type AuthorizationServer,
} from '../support/oidc.js';
import { callTool, connectHttp, ensureBuilt, startServe, textOf, type Served } from './helpers.js';
import { MCP_ACCEPT, rawInitialize } from '../support/mcp-raw.js';

const STATIC = 'static-token-0123456789';
const SCOPE = 'sandpit';

/** The SDK's provider for a client with a browser; here the browser is authorizeHeadless. */
class HeadlessProvider implements OAuthClientProvider {
  readonly redirectUrl = 'http://127.0.0.1:1/callback';
  code: Promise<string> | undefined;
  private info: OAuthClientInformationMixed | undefined;
  private saved: OAuthTokens | undefined;
  private verifier = '';

  get clientMetadata() {
    return {
      client_name: 'sandpit e2e',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
      scope: SCOPE,
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
    this.code = authorizeHeadless(url, this.redirectUrl);
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

describe('serve with OAuth (oidc-provider on 127.0.0.1)', () => {
  let as: AuthorizationServer;
  let served: Served;
  let mcpUrl: string;

  before(async () => {
    await requireDocker();
    ensureBuilt();
    as = await startAuthorizationServer([SCOPE]);
    served = await startServe((url) => ({
      auth: {
        token: STATIC,
        oauth: {
          issuer: as.issuer,
          audience: `${url}/mcp`,
          jwksUrl: as.jwksUrl,
          requiredScopes: [SCOPE],
          clockToleranceSeconds: 0,
          defaults: { templates: ['bash', 'python'] },
        },
      },
    }));
    mcpUrl = `${served.url}/mcp`;
  });
  after(async () => {
    if (served) assert.equal(await served.stop(), 0, served.logs.join('\n'));
    await as?.close();
  });

  const runBash = async (client: Client, code: string): Promise<string> => {
    const result = await callTool(client, 'run_code', { language: 'bash', code });
    assert.equal(result.isError, undefined, textOf(result));
    return (result.structuredContent as { stdout: string }).stdout;
  };

  const post = (token?: string) =>
    fetch(mcpUrl, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        ...MCP_ACCEPT,
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
      },
      body: JSON.stringify(rawInitialize()),
    });

  test('the Protected Resource Metadata (RFC 9728), at the path-inserted URL and the root', async () => {
    for (const path of [
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-protected-resource',
    ]) {
      const res = await fetch(`${served.url}${path}`);
      assert.equal(res.status, 200, path);
      assert.deepEqual(await res.json(), {
        resource: mcpUrl,
        authorization_servers: [as.issuer],
        scopes_supported: [SCOPE],
        bearer_methods_supported: ['header'],
        resource_name: 'sandpit',
      });
    }
  });

  test('no token: 401 whose WWW-Authenticate names the resource metadata', async () => {
    const res = await post();
    assert.equal(res.status, 401);
    assert.equal(
      res.headers.get('www-authenticate'),
      `Bearer realm="sandpit", scope="${SCOPE}", resource_metadata="${served.url}/.well-known/oauth-protected-resource/mcp"`,
    );
  });

  test("the SDK client's authorization code flow with PKCE, headless, runs code as iss#sub", async () => {
    const provider = new HeadlessProvider();
    const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
    await assert.rejects(new Client({ name: 'e2e', version: '1' }).connect(first), UnauthorizedError);
    assert.ok(provider.code, 'the client was sent to the authorization endpoint');
    await first.finishAuth(await provider.code);
    const token = provider.tokens()!.access_token;
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<
      string,
      unknown
    >;
    assert.equal(claims.aud, mcpUrl, 'a JWT for this resource (RFC 8707)');
    assert.equal(claims.sub, TEST_ACCOUNT);

    const client = new Client({ name: 'e2e', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider }));
    try {
      assert.equal(await runBash(client, 'echo via-oauth'), 'via-oauth\n');
      const result = await callTool(client, 'run_code', { language: 'bash', code: 'echo $((6*7))' });
      const runId = (result.structuredContent as { runId: string }).runId;
      const audit = served.logs.join('\n');
      assert.ok(audit.includes(`${as.issuer}#${TEST_ACCOUNT}`), 'the principal is iss#sub');
      assert.ok(runId);
    } finally {
      await client.close();
    }
  });

  test('ClientCredentialsProvider (a machine client) runs code', async () => {
    const provider = new ClientCredentialsProvider({ ...MACHINE, scope: SCOPE });
    const client = new Client({ name: 'machine', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider }));
    try {
      assert.equal(await runBash(client, 'echo machine'), 'machine\n');
    } finally {
      await client.close();
    }
  });

  test('a static token keeps working beside OAuth', async () => {
    const c = await connectHttp(mcpUrl, STATIC);
    try {
      assert.equal(await runBash(c.client, 'echo static'), 'static\n');
    } finally {
      await c.close();
    }
  });

  const refusedWith = async (token: string, status: number, error: string, description: RegExp) => {
    const res = await post(token);
    const header = res.headers.get('www-authenticate') ?? '';
    assert.equal(res.status, status, header);
    assert.match(header, new RegExp(`^Bearer realm="sandpit", error="${error}", error_description="`));
    assert.match(header, description);
    assert.match(
      header,
      /resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/,
    );
    await res.body?.cancel();
  };

  test('a token for another audience: 401 invalid_token', async () => {
    const token = await as.clientCredentials(MACHINE, 'http://127.0.0.1:1/other', SCOPE);
    await refusedWith(token, 401, 'invalid_token', /not issued for http:\/\/127\.0\.0\.1:\d+\/mcp/);
  });

  test('an expired token: 401 invalid_token', async () => {
    const token = await as.clientCredentials(SHORT_LIVED, mcpUrl, SCOPE);
    await new Promise((r) => setTimeout(r, 2100));
    await refusedWith(token, 401, 'invalid_token', /has expired/);
  });

  test('a token of another issuer: 401 invalid_token', async () => {
    const token = await as.sign({ iss: 'http://127.0.0.1:1', sub: 'x', aud: mcpUrl, scope: SCOPE });
    await refusedWith(token, 401, 'invalid_token', /not issued by http:\/\/127\.0\.0\.1:\d+"/);
  });

  test('a bad signature: 401 invalid_token', async () => {
    const token = await as.signWithOtherKey({ iss: as.issuer, sub: 'x', aud: mcpUrl, scope: SCOPE });
    await refusedWith(token, 401, 'invalid_token', /signature does not verify/);
  });

  test('a token without the required scope: 403 insufficient_scope', async () => {
    const token = await as.clientCredentials(MACHINE, mcpUrl);
    await refusedWith(token, 403, 'insufficient_scope', /lacks the scope sandpit/);
  });
});
