/**
 * docs/mcp.md's snippets, run as a user would: the stdio client JSON against the npm package packed
 * from this repository and installed under its name (sandpit-mcp) where npx runs, with
 * npm_config_offline=true so that npx uses that install and never asks the registry; and the HTTP
 * server config and client headers with a token (Host header as the docs' allowedHosts name it).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { requireDocker } from '../support/docker.js';
import {
  callTool,
  cleanEnv,
  connectStdio,
  ensureBuilt,
  newClient,
  ROOT,
  startServe,
  tempDir,
} from './helpers.js';
import { TOOL_NAMES } from '../../src/gateway/mcp/tools/index.js';
import { MCP_ACCEPT } from '../support/mcp-raw.js';

const DOC = readFileSync(join(ROOT, 'docs/mcp.md'), 'utf8');
const blocks = (lang: string): string[] =>
  [...DOC.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```', 'gm'))].map((m) => m[1]!);

interface ClientEntry {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  type?: string;
  url?: string;
  headers?: Record<string, string>;
}
/** The `mcpServers.sandpit` entry of every JSON client config in the doc. */
const clientConfigs = (): ClientEntry[] =>
  blocks('json')
    .filter((b) => b.includes('"mcpServers"'))
    .map((b) => JSON.parse(b) as { mcpServers?: { sandpit?: ClientEntry } })
    .flatMap((c) => (c.mcpServers?.sandpit ? [c.mcpServers.sandpit] : []));

before(async () => {
  await requireDocker();
  ensureBuilt();
});

/**
 * `npm install TARBALL` in `dir`: its dependencies come from the registry (or npm's cache). Once,
 * npm stalled there for good after its last fetch and ignored the SIGTERM of a timeout: each try
 * is killed after 5 minutes, and a second one follows a stall.
 */
function npmInstall(dir: string, tarball: string): void {
  const args = ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarball];
  for (let attempt = 1; ; attempt++) {
    try {
      execFileSync('npm', args, { cwd: dir, stdio: 'pipe', timeout: 300_000, killSignal: 'SIGKILL' });
      return;
    } catch (e) {
      if (attempt === 2 || (e as NodeJS.ErrnoException).code !== 'ETIMEDOUT') throw e;
    }
  }
}

describe('docs/mcp.md, stdio: the packed package under its name, through npx, offline', () => {
  let installDir: string;
  let packDir: string;
  before(() => {
    packDir = tempDir('pack');
    installDir = tempDir('install');
  });
  after(() => {
    rmSync(installDir, { recursive: true, force: true });
    rmSync(packDir, { recursive: true, force: true });
  });

  test('npm pack makes sandpit-mcp-<version>.tgz with the build, and without sources or tests', () => {
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: ROOT, encoding: 'utf8' }),
    ) as { filename: string; files: { path: string }[] }[];
    assert.match(packed[0]!.filename, /^sandpit-mcp-\d+\.\d+\.\d+\.tgz$/);
    const paths = packed[0]!.files.map((f) => f.path);
    for (const p of ['dist/cmd/cli.js', 'dist/gateway/mcp/server.js', 'images/build.sh', 'docs/mcp.md'])
      assert.ok(paths.includes(p), `${p} ships`);
    assert.ok(!paths.some((p) => p.startsWith('src/') || p.startsWith('test/')), 'sources and tests do not');
    writeFileSync(
      join(installDir, 'package.json'),
      JSON.stringify({ name: 'client', version: '1.0.0', private: true }),
    );
    npmInstall(installDir, join(packDir, packed[0]!.filename));
    assert.ok(existsSync(join(installDir, 'node_modules/.bin/sandpit')), 'its one bin, sandpit, is linked');
  });

  test('the Claude Code line: npx -y sandpit-mcp runs the installed sandpit, never the registry', () => {
    const line = blocks('sh')
      .flatMap((b) => b.split('\n'))
      .find((l) => l.startsWith('claude mcp add sandpit -- '));
    assert.ok(line, 'docs/mcp.md has the claude mcp add line');
    const [command, ...args] = line.split(' -- ')[1]!.trim().split(/\s+/);
    assert.deepEqual([command, ...args], ['npx', '-y', 'sandpit-mcp', 'mcp']);
    const out = execFileSync(command!, [...args.slice(0, -1), '--version'], {
      cwd: installDir,
      encoding: 'utf8',
      env: cleanEnv({ npm_config_offline: 'true' }),
    });
    assert.match(out, /^sandpit \d+\.\d+\.\d+\n$/);
  });

  test('the Cursor / Claude Desktop JSON, verbatim: tools/list, a run, and its env applied', async () => {
    const entry = clientConfigs().find((c) => c.command === 'npx');
    assert.ok(entry?.args && entry.env, 'docs/mcp.md has the stdio JSON');
    assert.deepEqual(entry.args, ['-y', 'sandpit-mcp', 'mcp']);
    const server = await connectStdio({
      command: entry.command!,
      args: entry.args,
      cwd: installDir,
      env: cleanEnv({ ...entry.env, npm_config_offline: 'true' }),
    });
    try {
      const { tools } = await server.client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
      assert.equal(server.client.getServerVersion()?.name, 'sandpit');
      const r = await callTool(server.client, 'run_code', { code: 'print("from the installed package")' });
      assert.equal((r.structuredContent as { stdout: string }).stdout, 'from the installed package\n');
      const templates = (await callTool(server.client, 'list_templates')).structuredContent as {
        templates: { name: string; defaults: { timeoutSeconds: number } }[];
      };
      assert.equal(
        templates.templates.find((t) => t.name === 'python')?.defaults.timeoutSeconds,
        Number(entry.env.CONTAINER_TIMEOUT_SECONDS),
        'the snippet’s CONTAINER_TIMEOUT_SECONDS is the ceiling',
      );
    } finally {
      await server.close();
    }
  });
});

/** fetch over loopback that sends `host` as the Host header (fetch itself may not set it). */
function fetchWithHost(host: string): typeof fetch {
  return (input, init) =>
    new Promise((resolve, reject) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const headers = new Headers(init?.headers);
      headers.set('host', host);
      const req = request(
        url,
        {
          method: init?.method ?? 'GET',
          headers: Object.fromEntries(headers),
          signal: init?.signal ?? undefined,
        },
        (res) => {
          const body =
            res.statusCode === 202 || res.statusCode === 204 ? null : (Readable.toWeb(res) as ReadableStream);
          const out = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') out.set(k, v);
          resolve(new Response(body, { status: res.statusCode ?? 500, headers: out }));
        },
      );
      req.on('error', reject);
      if (init?.body) req.write(init.body as string);
      req.end();
    });
}

describe('docs/mcp.md, HTTP: the server config and client headers, with a token', () => {
  const TOKEN = 'docs-snippet-token-0123456789';
  const CI_TOKEN = 'docs-snippet-ci-token-0123456789';
  let served: Awaited<ReturnType<typeof startServe>>;
  let config: {
    server: { allowedHosts: string[] };
    auth: { tokens: { name: string; tokenSha256?: string }[] };
  };

  before(async () => {
    const yaml = blocks('yaml').find((b) => b.startsWith('# /etc/sandpit.yaml'));
    assert.ok(yaml, 'docs/mcp.md has the server config');
    config = parseYaml(yaml) as typeof config;
    // The doc's one placeholder: the sha256 of a token of our own.
    config.auth.tokens[0]!.tokenSha256 = createHash('sha256').update(CI_TOKEN).digest('hex');
    served = await startServe(config, [], { MCP_AUTH_TOKEN: TOKEN });
  });
  after(() => served.stop());

  test('a local health probe on 127.0.0.1 gets 200 with allowedHosts set as shown', async () => {
    assert.equal((await fetch(`${served.url}/health`)).status, 200);
  });

  test('the .mcp.json entry: its URL’s host and Authorization header reach the tools', async () => {
    const entry = clientConfigs().find((c) => c.type === 'http');
    assert.ok(entry?.url && entry.headers, 'docs/mcp.md has the HTTP client JSON');
    const url = new URL(entry.url);
    assert.deepEqual(config.server.allowedHosts, [url.hostname]);
    const headers = Object.fromEntries(
      Object.entries(entry.headers).map(([k, v]) => [k, v.replace('${SANDPIT_TOKEN}', TOKEN)]),
    );
    for (const [who, token] of [
      ['MCP_AUTH_TOKEN', TOKEN],
      ['the scoped ci token', CI_TOKEN],
    ] as const) {
      const transport = new StreamableHTTPClientTransport(new URL(`${served.url}${url.pathname}`), {
        requestInit: { headers: { ...headers, Authorization: `Bearer ${token}` } },
        fetch: fetchWithHost(url.hostname),
      });
      const client = newClient();
      await client.connect(transport);
      try {
        const r = await callTool(client, 'run_code', { code: 'print(6 * 7)' });
        assert.equal((r.structuredContent as { stdout: string }).stdout, '42\n', who);
      } finally {
        await transport.terminateSession().catch(() => undefined);
        await client.close();
      }
    }
    const denied = await fetchWithHost(url.hostname)(`${served.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...MCP_ACCEPT },
      body: '{}',
    });
    assert.equal(denied.status, 401, 'no token: 401');
  });
});
