/**
 * The REST API's OpenAPI 3.1 document, generated from the zod schemas of src/api (the single source
 * of truth), never written by hand. JSON Schema 2020-12 is OpenAPI 3.1's own dialect, so zod's
 * output goes in as it is. `REST_ROUTES` is the list the document covers; a test checks that it is
 * exactly what the express app serves, and the session WebSocket's upgrade.
 */
import * as z from 'zod';
import { ErrorBodySchema } from '../../api/error.js';
import { RunRequestSchema, RunResultSchema } from '../../api/run.js';
import {
  ExecLogSchema,
  ExecRequestSchema,
  ExecResultSchema,
  FileEntrySchema,
  SessionPatchSchema,
  SessionRequestSchema,
  SessionSchema,
} from '../../api/session.js';
import type { Policy } from '../../policy/policy.js';
import { EXEC_WS_ROUTE } from './exec-ws.js';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

interface Operation {
  summary: string;
  description?: string;
  request?: { schema: z.ZodType } | { raw: true };
  /** Status → schema (undefined: no body). */
  responses: Record<number, z.ZodType | 'binary' | 'tar' | undefined>;
  query?: Record<string, string>;
}

/** Every REST route, in express's path syntax, with what it takes and answers. */
export const REST_ROUTES: Record<string, Partial<Record<Method, Operation>>> = {
  '/sessions': {
    post: {
      summary: 'Create a session (the seed\'s {"image", "timeout"} body works as it is)',
      request: { schema: SessionRequestSchema },
      responses: { 201: SessionSchema },
    },
    get: {
      summary: 'Your sessions, live and recently ended',
      responses: { 200: z.object({ sessions: z.array(SessionSchema) }) },
    },
  },
  '/sessions/:id': {
    get: { summary: 'One session', responses: { 200: SessionSchema } },
    patch: {
      summary: 'Extend its lifetime',
      request: { schema: SessionPatchSchema },
      responses: { 200: SessionSchema },
    },
    delete: { summary: 'End it and remove its sandbox', responses: { 200: SessionSchema } },
  },
  '/sessions/:id/files': {
    get: {
      summary: 'List a directory of the workspace',
      query: { path: 'Directory (default: the workspace)', recursive: 'true to descend' },
      responses: { 200: z.object({ entries: z.array(FileEntrySchema) }) },
    },
  },
  '/sessions/:id/files/*path': {
    put: {
      summary: 'Upload a file: the raw body, any Content-Type, never parsed',
      request: { raw: true },
      query: { mode: 'Octal permissions, e.g. 755', append: 'true to add to the end' },
      responses: { 201: FileEntrySchema },
    },
    get: { summary: 'Download a file', responses: { 200: 'binary' } },
    delete: {
      summary: 'Remove a file (recursive=true for a directory)',
      query: { recursive: 'true' },
      responses: { 204: undefined },
    },
  },
  '/sessions/:id/artifacts': {
    get: {
      summary: 'A path, or the whole workspace, as a tar stream',
      query: { path: 'Path (default: all)' },
      responses: { 200: 'tar' },
    },
  },
  '/sessions/:id/exec': {
    post: {
      summary: 'Run a command: JSON result, or NDJSON / SSE events while it runs (Accept)',
      request: { schema: ExecRequestSchema },
      responses: { 200: ExecResultSchema, 202: ExecResultSchema },
    },
  },
  [EXEC_WS_ROUTE]: {
    get: {
      summary: 'Interactive exec over a WebSocket (upgrade), with a pty when tty is true',
      description: [
        'Auth: the Authorization header, or the subprotocol `bearer.<token>`; offer `sandpit.exec.v1`.',
        'No query string (a token there is refused). A page of another origin is refused.',
        'The first message is JSON text: the exec body without background and stdin, plus cols and rows.',
        'Then binary messages whose first byte is a channel: 0 stdin, 4 resize ({cols, rows} JSON) and',
        '255 end of stdin from the client; 1 stdout, 2 stderr and 3 the exit (the exec result, or',
        '{error}) from the server, which then closes: 1000, or 4000 + the HTTP status of an error.',
      ].join(' '),
      responses: { 101: undefined },
    },
  },
  '/sessions/:id/exec/:execId': {
    get: { summary: "An exec's state: live output while it runs", responses: { 200: ExecResultSchema } },
    delete: { summary: 'Kill a running exec', responses: { 200: ExecResultSchema } },
  },
  '/sessions/:id/logs': {
    get: {
      summary: 'The exec history with outputs (last 100 execs or 1 MiB)',
      responses: { 200: ExecLogSchema },
    },
  },
  '/runs': {
    post: {
      summary: 'Run code once in a fresh sandbox; waits for the result unless wait=false',
      request: { schema: RunRequestSchema },
      query: {
        wait: 'false to answer 202 once the run is recorded (GET /runs/{id} then finds it on any replica)',
      },
      responses: { 200: RunResultSchema, 202: RunResultSchema },
    },
  },
  '/runs/:id': {
    get: {
      summary: 'A run: live output while it runs, the result after',
      responses: { 200: RunResultSchema },
    },
    delete: { summary: 'Cancel a run', responses: { 200: RunResultSchema } },
  },
  '/runs/:id/files/*path': {
    get: {
      summary: 'A file the run returned (its outputs), with its media type',
      responses: { 200: 'binary' },
    },
  },
  '/runs/:id/artifacts': {
    get: { summary: 'Every file the run returned, as a tar stream', responses: { 200: 'tar' } },
  },
};

const schemaOf = (schema: z.ZodType, io: 'input' | 'output'): object => {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  });
  return json;
};

/** `/sessions/:id/files/*path` as OpenAPI writes it: `/sessions/{id}/files/{path}`. */
export const openApiPath = (route: string): string => route.replace(/[:*](\w+)/g, '{$1}');

function parametersOf(route: string, query: Record<string, string> = {}): object[] {
  const inPath = [...route.matchAll(/[:*](\w+)/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
  const inQuery = Object.entries(query).map(([name, description]) => ({
    name,
    in: 'query',
    required: false,
    description,
    schema: { type: 'string' },
  }));
  return [...inPath, ...inQuery];
}

function responseOf(body: Operation['responses'][number], status: number): object {
  const description =
    status === 204 ? 'No content' : status === 101 ? 'Switching Protocols: the WebSocket is open' : 'OK';
  if (body === undefined) return { description };
  if (body === 'binary')
    return {
      description,
      content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
    };
  if (body === 'tar')
    return {
      description,
      content: { 'application/x-tar': { schema: { type: 'string', format: 'binary' } } },
    };
  return { description, content: { 'application/json': { schema: schemaOf(body, 'output') } } };
}

export function openApiDocument(_policy: Policy, version: string): object {
  const error = {
    description: 'An error',
    content: { 'application/json': { schema: schemaOf(ErrorBodySchema, 'output') } },
  };
  const paths: Record<string, object> = {};
  for (const [route, methods] of Object.entries(REST_ROUTES)) {
    const ops: Record<string, object> = {};
    for (const [method, op] of Object.entries(methods) as [Method, Operation][]) {
      const responses: Record<string, object> = { default: error };
      for (const [status, body] of Object.entries(op.responses))
        responses[status] = responseOf(body, Number(status));
      ops[method] = {
        summary: op.summary,
        ...(op.description ? { description: op.description } : {}),
        operationId: `${method}${openApiPath(route)
          .replace(/[{}]/g, '')
          .replace(/\/(\w)/g, (_m, c: string) => c.toUpperCase())
          .replace(/\W/g, '')}`,
        parameters: parametersOf(route, op.query),
        ...(op.request
          ? {
              requestBody: {
                required: true,
                content:
                  'raw' in op.request
                    ? { '*/*': { schema: { type: 'string', format: 'binary' } } }
                    : { 'application/json': { schema: schemaOf(op.request.schema, 'input') } },
              },
            }
          : {}),
        responses,
      };
    }
    paths[openApiPath(route)] = ops;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'sandpit',
      version,
      description: 'Sessions and one-shot runs of untrusted code in locked-down sandboxes',
    },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    security: [{ bearer: [] }],
    paths,
  };
}
