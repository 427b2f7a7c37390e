/**
 * The session flows a user runs against `sandpit serve`, whatever its backend: the seed's use
 * case 1 as its curl commands send it (with an artifact downloaded), and the MCP flow of three
 * commands sharing files and state. test/e2e/sessions.test.ts runs them on Docker,
 * test/contract/sessions-kubernetes.test.ts in Kubernetes mode.
 */
import assert from 'node:assert/strict';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callTool, type Connected } from './helpers.js';

export const JSON_TYPE = { 'Content-Type': 'application/json' };

export interface RestReply {
  status: number;
  json: Record<string, unknown>;
  bytes: Buffer;
  text: string;
}

/** REST calls to one server, as one token (others given per call). */
export function restClient(url: () => string, token: string) {
  const auth = (t = token) => ({ Authorization: `Bearer ${t}` });
  async function rest(
    method: string,
    path: string,
    body?: string | Buffer,
    headers: Record<string, string> = {},
  ): Promise<RestReply> {
    const res = await fetch(`${url()}${path}`, { method, headers: { ...auth(), ...headers }, body });
    const bytes = Buffer.from(await res.arrayBuffer());
    const text = bytes.toString('utf8');
    let json: Record<string, unknown> = {};
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // a download
    }
    return { status: res.status, json, bytes, text };
  }
  async function createSession(body = '{"image":"python:3.11","timeout":30}', t = token): Promise<string> {
    const r = await rest('POST', '/sessions', body, { ...JSON_TYPE, ...auth(t) });
    assert.equal(r.status, 201, r.text);
    return r.json.id as string;
  }
  async function exec(id: string, command: string[]): Promise<Record<string, unknown>> {
    const r = await rest('POST', `/sessions/${id}/exec`, JSON.stringify({ command }), JSON_TYPE);
    assert.equal(r.status, 200, r.text);
    return r.json;
  }
  return { auth, rest, createSession, exec };
}

export type RestClient = ReturnType<typeof restClient>;

/** The seed's curl commands: create, upload a script, run it, read its output file, download it as an artifact, delete. */
export async function seedCurlFlow({ rest, createSession, exec }: RestClient): Promise<void> {
  const id = await createSession();
  const script =
    'import json\nopen("out.json", "w").write(json.dumps({"answer": 42}))\nprint("wrote out.json")\n';
  const put = await rest('PUT', `/sessions/${id}/files/script.py`, script, {
    'Content-Type': 'application/x-www-form-urlencoded',
  });
  assert.equal(put.status, 201, put.text);
  const r = await exec(id, ['python', 'script.py']);
  assert.equal(r.exitCode, 0, JSON.stringify(r));
  assert.equal(r.stdout, 'wrote out.json\n');
  const out = await rest('GET', `/sessions/${id}/files/out.json`);
  assert.deepEqual(JSON.parse(out.text), { answer: 42 });
  const tar = await rest('GET', `/sessions/${id}/artifacts?path=out.json`);
  assert.equal(tar.status, 200);
  assert.ok(tar.bytes.includes(Buffer.from('{"answer": 42}')), 'the tar holds the file');
  assert.equal((await rest('DELETE', `/sessions/${id}`)).json.state, 'Deleted');
}

/** A tool call that must succeed, as its structured content. */
export function toolCaller(connected: Connected) {
  return async (name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> => {
    const r: CallToolResult = await callTool(connected.client, name, args);
    assert.ok(!r.isError, JSON.stringify(r.content));
    return r.structuredContent as Record<string, unknown>;
  };
}

/** Over MCP: three commands share files and state in one session, then it is deleted. */
export async function mcpSessionFlow(connected: Connected): Promise<void> {
  const call = toolCaller(connected);
  const id = (await call('sandbox_create', { language: 'python' })).id as string;
  await call('sandbox_write_file', {
    sessionId: id,
    path: 'counter.py',
    content:
      'import pathlib\np = pathlib.Path("n")\nn = int(p.read_text()) if p.exists() else 0\np.write_text(str(n + 1))\nprint(n + 1)\n',
  });
  const outputs = [];
  for (let i = 0; i < 3; i++)
    outputs.push((await call('sandbox_exec', { sessionId: id, command: ['python', 'counter.py'] })).stdout);
  assert.deepEqual(outputs, ['1\n', '2\n', '3\n'], 'three commands share files and state');
  assert.equal((await call('sandbox_read_file', { sessionId: id, path: 'n' })).content, '3');
  const files = (await call('sandbox_list_files', { sessionId: id })).entries as { path: string }[];
  assert.deepEqual(files.map((f) => f.path).sort(), ['counter.py', 'n']);
  assert.equal((await call('sandbox_delete', { sessionId: id })).state, 'Deleted');
}
