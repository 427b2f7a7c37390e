/**
 * The REST API through the real HTTP app on loopback, over an in-memory session backend: the seed's
 * use case 1 as its curl commands send it, the errors each as JSON naming the field with the right
 * status, another token's session a 404, and the OpenAPI document validated by a real OpenAPI
 * parser and covering exactly the routes express serves. The same flows on the real engine are the
 * docker tier's.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { validate } from '@readme/openapi-parser';
import type { Listening } from '../../../src/gateway/http/listen.js';
import { EXEC_WS_ROUTE } from '../../../src/gateway/http/exec-ws.js';
import { openApiPath, REST_ROUTES } from '../../../src/gateway/http/openapi.js';
import { serveMemoryGateway, type MemoryGateway } from '../../support/memory-gateway.js';
import type { MemorySandbox } from '../../support/memory-sessions.js';

const TOKEN = 'admin-token-0123456789';
const OTHER = 'other-token-0123456789';
let server: Listening;
let sandboxes: MemorySandbox[];
let app: MemoryGateway['app'];
before(async () => {
  const gateway = await serveMemoryGateway({ token: TOKEN, other: OTHER });
  ({ server, sandboxes, app } = gateway);
});
after(() => server.close());

const auth = (token = TOKEN) => ({ Authorization: `Bearer ${token}` });
const json = { 'Content-Type': 'application/json' };
async function send(
  method: string,
  path: string,
  init: { headers?: Record<string, string>; body?: string } = {},
) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { ...auth(), ...init.headers },
    body: init.body,
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    text,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

describe('REST', () => {
  test("the seed's use case 1, as its curl commands send it", async () => {
    const created = await send('POST', '/sessions', {
      headers: json,
      body: '{"image":"python:3.11","timeout":30}',
    });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    assert.equal(created.headers.get('location'), `/sessions/${id}`);
    for (const f of ['id', 'state', 'image', 'limits', 'expiresAt', 'idleExpiresAt'])
      assert.ok(f in created.body, f);
    // curl --data-binary @script.py sends application/x-www-form-urlencoded: never parsed.
    const script = 'x = 1&y=2\nprint("hi")\n';
    const put = await send('PUT', `/sessions/${id}/files/script.py`, {
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: script,
    });
    assert.equal(put.status, 201, put.text);
    assert.equal(sandboxes.at(-1)?.files.get('script.py')?.toString(), script);
    const exec = await send('POST', `/sessions/${id}/exec`, {
      headers: json,
      body: '{"command":["python","script.py"]}',
    });
    assert.equal(exec.status, 200, exec.text);
    assert.equal(exec.body.phase, 'Succeeded');
    assert.equal(exec.body.stdout, 'python script.py\n');
    assert.equal(exec.body.sessionId, id);
    const download = await fetch(`${server.url}/sessions/${id}/files/script.py`, { headers: auth() });
    assert.equal(await download.text(), script);
    const logs = await send('GET', `/sessions/${id}/logs`);
    assert.equal((logs.body.execs as unknown[]).length, 1);
    const ndjson = await fetch(`${server.url}/sessions/${id}/exec`, {
      method: 'POST',
      headers: { ...auth(), ...json, Accept: 'application/x-ndjson' },
      body: '{"command":["echo","hi"]}',
    });
    const events = (await ndjson.text())
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { event: string }).event);
    assert.deepEqual(events, ['started', 'output', 'result']);
    assert.equal((await send('DELETE', `/sessions/${id}`)).body.state, 'Deleted');
  });

  test('errors are JSON {error: {code, message, hint}} with the right status, naming the field', async () => {
    const id = (await send('POST', '/sessions', { headers: json, body: '{"template":"python"}' })).body
      .id as string;
    const cases: [
      string,
      string,
      { headers?: Record<string, string>; body?: string },
      number,
      string,
      string?,
    ][] = [
      ['POST', '/sessions', { headers: json, body: '{"image":' }, 400, 'INVALID_REQUEST'],
      [
        'POST',
        '/sessions',
        { headers: { 'Content-Type': 'text/plain' }, body: '{}' },
        415,
        'UNSUPPORTED_MEDIA_TYPE',
        'Content-Type',
      ],
      [
        'POST',
        `/sessions/${id}/exec`,
        { headers: json, body: '{"command":"ls"}' },
        400,
        'INVALID_REQUEST',
        'command',
      ],
      ['PUT', `/sessions/${id}/files/..%2F..%2Fetc%2Fpasswd`, { body: 'x' }, 400, 'INVALID_REQUEST', 'path'],
      ['PUT', `/sessions/${id}/files/m?mode=-1`, { body: 'x' }, 400, 'INVALID_REQUEST', 'mode'],
      ['PUT', `/sessions/${id}/files/m?mode=4755`, { body: 'x' }, 400, 'INVALID_REQUEST', 'mode'],
      ['PUT', `/sessions/${id}/files/m?mode=rwx`, { body: 'x' }, 400, 'INVALID_REQUEST', 'mode'],
      // The runner refuses the path before the first byte of the tar: still a status and JSON.
      ['GET', `/sessions/${id}/artifacts?path=link-out`, {}, 400, 'INVALID_REQUEST', 'path'],
      ['GET', '/sessions/ses-unknown', {}, 404, 'NOT_FOUND'],
      ['GET', `/sessions/${id}`, { headers: auth(OTHER) }, 404, 'NOT_FOUND'],
      ['DELETE', `/sessions/${id}`, { headers: auth(OTHER) }, 404, 'NOT_FOUND'],
      ['GET', '/sessions', { headers: { Authorization: 'Bearer wrong-token-000000' } }, 401, 'UNAUTHORIZED'],
    ];
    for (const [method, path, init, status, code, field] of cases) {
      const r = await send(method, path, init);
      assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
      const error = r.body.error as { code: string; message: string; violations?: { field: string }[] };
      assert.equal(error.code, code, r.text);
      assert.ok(error.message);
      if (field)
        assert.ok(
          error.violations?.some((v) => v.field === field),
          r.text,
        );
    }
    assert.equal(sandboxes.at(-1)?.files.size, 0, 'no partial state');
    const fine = await send('PUT', `/sessions/${id}/files/m?mode=0750`, { body: 'x' });
    assert.equal(fine.status, 201, fine.text);
    assert.equal((await send('GET', `/sessions/${id}`)).body.state, 'Ready');
  });

  test('/openapi.json is valid OpenAPI 3.1 and lists exactly the REST routes express serves, and the WebSocket', async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
    };
    assert.equal(doc.openapi, '3.1.0');
    const result = await validate(structuredClone(doc) as never);
    assert.ok(result.valid, JSON.stringify(result).slice(0, 3000));
    const served: [string, string][] = [
      ...routesOf(app).filter(([, path]) => path.startsWith('/sessions') || path.startsWith('/runs')),
      ['get', EXEC_WS_ROUTE], // the upgrade: served by the HTTP server, not express (exec-ws.test.ts)
    ];
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => [m, path]),
    );
    assert.deepEqual(
      served.map(([m, p]) => `${m} ${openApiPath(p)}`).sort(),
      documented.map(([m, p]) => `${m} ${p}`).sort(),
    );
    assert.equal(Object.keys(REST_ROUTES).length, Object.keys(doc.paths).length);
  });
});

/** [method, path] of every route the express app (and its routers) serves. */
function routesOf(root: { router?: unknown; _router?: unknown }): [string, string][] {
  const out: [string, string][] = [];
  const walk = (stack: unknown[]): void => {
    for (const layer of stack as {
      route?: { path: string; methods: Record<string, boolean> };
      handle?: { stack?: unknown[] };
    }[]) {
      if (layer.route) for (const m of Object.keys(layer.route.methods)) out.push([m, layer.route.path]);
      else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((root.router as { stack: unknown[] }).stack);
  return out;
}
