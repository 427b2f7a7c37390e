/**
 * The hostile gateway served over HTTP on loopback, on the Docker backend, for the files that
 * attack its surface rather than its sandboxes: a second tenant's token beside the canary, raw
 * HTTP (paths sent as written, never normalised), and the witnesses of what a refused request may
 * not do: start a sandbox (the engine's own create events) or leave one behind.
 */
import assert from 'node:assert/strict';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type Docker from 'dockerode';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { currentOwner } from '../../src/backends/docker/owner.js';
import { containersOfPid } from '../e2e/helpers.js';
import { createdSince, requireDocker } from '../support/docker.js';
import { CANARY, HOSTILE_SANDBOX_CONFIG, serveGateway, type ServedGateway } from './gateway.js';

/** The second tenant's token. */
export const OTHER_TOKEN = 'hostile-other-tenant-0123456789abcdef';

export interface Served extends ServedGateway {
  docker: Docker;
}

/** The hostile gateway on Docker (no pools: every sandbox is a container created for it), plus `server` settings. */
export async function serveOnDocker(server: Record<string, unknown> = {}): Promise<Served> {
  const docker = await requireDocker();
  const served = await serveGateway({
    // Many small requests from one token: the per-token rate limit is not what these files test.
    server: { maxRequestsPerSecond: 100_000, ...server },
    auth: { tokens: [{ name: 'other', token: OTHER_TOKEN }] },
    sandbox: { backend: 'docker', ...HOSTILE_SANDBOX_CONFIG },
    pool: { enabled: false },
  });
  return { ...served, docker };
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The body as JSON, or undefined when it is not. */
  json: unknown;
}

export interface Sent {
  method?: string;
  /** The bearer token; null sends none. Default: the canary. */
  token?: string | null;
  headers?: Record<string, string>;
  /** A JSON body (sent as application/json unless headers say otherwise), or raw bytes. */
  body?: unknown;
}

/** One HTTP request to `base` + `path`, the path sent byte for byte as given. */
export function send(base: string, path: string, sent: Sent = {}): Promise<Answer> {
  const { hostname, port } = new URL(base);
  const token = sent.token === undefined ? CANARY : sent.token;
  const raw = typeof sent.body === 'string' || Buffer.isBuffer(sent.body);
  const body =
    sent.body === undefined ? undefined : raw ? (sent.body as string | Buffer) : JSON.stringify(sent.body);
  const headers: Record<string, string> = {
    ...(token !== null ? { Authorization: `Bearer ${token}` } : {}),
    ...(body !== undefined && !raw ? { 'Content-Type': 'application/json' } : {}),
    ...(body !== undefined ? { 'Content-Length': String(Buffer.byteLength(body)) } : {}),
    ...sent.headers,
  };
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { hostname, port, path, method: sent.method ?? (body === undefined ? 'GET' : 'POST'), headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The typed error of a REST answer: its status and `error.code`, and the field a violation names. */
export function assertRefused(answer: Answer, status: number, code: string, field?: string): void {
  const error = (answer.json as { error?: { code?: string; violations?: { field: string }[] } } | undefined)
    ?.error;
  assert.equal(answer.status, status, answer.text);
  assert.equal(error?.code, code, answer.text);
  if (field !== undefined)
    assert.ok(
      error.violations?.some((v) => v.field === field || v.field.startsWith(`${field}.`)),
      `a violation names ${field}: ${answer.text}`,
    );
}

/** The JSON-RPC error of an /mcp answer: its status, JSON-RPC code, and the typed error in its data when given. */
export function assertRpcRefused(answer: Answer, status: number, rpcCode: number, code?: string): void {
  const error = (answer.json as { error?: { code?: number; data?: { code?: string } } } | undefined)?.error;
  assert.equal(answer.status, status, answer.text);
  assert.equal(error?.code, rpcCode, answer.text);
  if (code !== undefined) assert.equal(error.data?.code, code, answer.text);
}

/** A tool call's typed refusal: an isError result whose error has `code` (and names `field`). */
export async function assertToolRefused(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  code: string,
  field?: string,
): Promise<void> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const error = result._meta?.['sandpit.dev/error'] as
    { code: string; violations?: { field: string }[] } | undefined;
  const shown = JSON.stringify(result).slice(0, 600);
  assert.equal(result.isError, true, `${name} refused: ${shown}`);
  assert.equal(error?.code, code, shown);
  if (field !== undefined)
    assert.ok(
      error.violations?.some((v) => v.field === field || v.field.startsWith(`${field}.`)),
      `a violation names ${field}: ${shown}`,
    );
}

/** No container was created by this process (the gateway's backend) since `sinceMs`. */
export async function assertNothingStarted(docker: Docker, sinceMs: number): Promise<void> {
  assert.deepEqual(await createdSince(docker, currentOwner(), sinceMs), [], 'no sandbox was started');
}

/** This process's containers now, but those of `keep` (live sessions a file holds on purpose). */
export async function leftovers(docker: Docker, keep: readonly string[] = []): Promise<string[]> {
  const all = await containersOfPid(docker, process.pid);
  return all.filter((name) => !keep.some((k) => name.includes(k)));
}
