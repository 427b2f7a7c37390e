/**
 * The REST API of sessions, as the code-sandbox-mcp seed documents it: thin routes over the session
 * use cases. A file upload is the raw body, never parsed (curl --data-binary sends it as a form),
 * and streamed to the sandbox; a download and the artifacts tar stream back. An exec answers JSON,
 * or NDJSON or SSE while it runs when the client asks (Accept); a foreground exec whose client
 * goes away is killed.
 */
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { Router, type Request, type Response } from 'express';
import type { ExecEvent } from '../../api/session.js';
import { AppError } from '../../shared/errors.js';
import type { SandpitService } from '../service.js';
import { primed } from './primed.js';
import { param, principalOfRequest, type requireJson } from './request.js';

type Streaming = 'json' | 'ndjson' | 'sse';

function streamingOf(req: Request): Streaming {
  const type = req.accepts(['application/json', 'application/x-ndjson', 'text/event-stream']);
  return type === 'application/x-ndjson' ? 'ndjson' : type === 'text/event-stream' ? 'sse' : 'json';
}

/** An AbortSignal that fires when the client goes away before the answer is complete. */
function clientGone(res: Response): AbortSignal {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort(new Error('the client went away'));
  });
  return controller.signal;
}

/** `?mode=755`: permission bits in octal, as sandbox_write_file takes them (0–0777); anything else is refused. */
function modeOf(query: unknown): number | undefined {
  if (query === undefined) return undefined;
  if (typeof query === 'string' && /^0?[0-7]{1,3}$/.test(query)) return Number.parseInt(query, 8);
  throw new AppError('INVALID_REQUEST', `invalid mode: ${JSON.stringify(query)}`, {
    violations: [{ field: 'mode', message: 'expected octal permission bits, 0 to 777' }],
    hint: 'e.g. ?mode=755',
  });
}

export function sessionRoutes(service: SandpitService, json: ReturnType<typeof requireJson>): Router {
  const router = Router();
  const sessions = service.sessions;
  // A session another replica made (or this one before a restart) is taken over first.
  router.param('id', (req, _res, next, id: string) => {
    Promise.resolve()
      .then(() => sessions.serve(id, principalOfRequest(req)))
      .then(() => next(), next);
  });

  router.post('/sessions', json, async (req, res) => {
    const session = await sessions.create(req.body, principalOfRequest(req), { signal: clientGone(res) });
    res.status(201).location(`/sessions/${session.id}`).json(session);
  });
  router.get('/sessions', async (req, res) => {
    res.json({ sessions: await sessions.list(principalOfRequest(req)) });
  });
  router.get('/sessions/:id', async (req, res) => {
    res.json(await sessions.get(param(req, 'id'), principalOfRequest(req)));
  });
  router.patch('/sessions/:id', json, async (req, res) => {
    res.json(await sessions.extend(param(req, 'id'), principalOfRequest(req), req.body));
  });
  router.delete('/sessions/:id', async (req, res) => {
    res.json(await sessions.delete(param(req, 'id'), principalOfRequest(req)));
  });

  router.get('/sessions/:id/files', async (req, res) => {
    const path = typeof req.query.path === 'string' ? req.query.path : undefined;
    const recursive = req.query.recursive === 'true' || req.query.recursive === '1';
    res.json({
      entries: await sessions.listFiles(param(req, 'id'), principalOfRequest(req), { path, recursive }),
    });
  });
  router.put('/sessions/:id/files/*path', async (req, res) => {
    const mode = modeOf(req.query.mode);
    const entry = await sessions.writeFile(param(req, 'id'), principalOfRequest(req), {
      path: param(req, 'path'),
      content: req,
      mode,
      append: req.query.append === 'true',
    });
    res.status(201).json(entry);
  });
  router.get('/sessions/:id/files/*path', async (req, res) => {
    const file = await sessions.readFile(param(req, 'id'), principalOfRequest(req), {
      path: param(req, 'path'),
    });
    res.status(200).type('application/octet-stream').setHeader('Content-Length', String(file.entry.size));
    await pipeline(Readable.from(file.data), res);
  });
  router.delete('/sessions/:id/files/*path', async (req, res) => {
    await sessions.removeFile(param(req, 'id'), principalOfRequest(req), {
      path: param(req, 'path'),
      recursive: req.query.recursive === 'true',
    });
    res.status(204).end();
  });
  router.get('/sessions/:id/artifacts', async (req, res) => {
    const path = typeof req.query.path === 'string' ? req.query.path : '';
    const tar = await primed(sessions.artifacts(param(req, 'id'), principalOfRequest(req), path));
    res.status(200).type('application/x-tar');
    res.setHeader('Content-Disposition', `attachment; filename="${param(req, 'id')}.tar"`);
    await pipeline(Readable.from(tar), res);
  });

  router.post('/sessions/:id/exec', json, async (req, res) => {
    const streaming = streamingOf(req);
    const principal = principalOfRequest(req);
    if (streaming === 'json') {
      const handle = sessions.exec(param(req, 'id'), principal, req.body, { signal: clientGone(res) });
      const background = (req.body as { background?: unknown }).background === true;
      res
        .status(background ? 202 : 200)
        .json(
          background
            ? sessions.startedResult(param(req, 'id'), handle.execId, principal)
            : await handle.result,
        );
      return;
    }
    // The events ExecEventSchema describes (the CLI parses them with it).
    const send = (e: ExecEvent): void => {
      const { event, ...data } = e;
      if (streaming === 'ndjson') res.write(`${JSON.stringify(e)}\n`);
      else res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    const handle = sessions.exec(param(req, 'id'), principal, req.body, {
      signal: clientGone(res),
      onOutput: (chunk) => {
        if (chunk.text) send({ event: 'output', stream: chunk.stream, text: chunk.text });
      },
    });
    res.status(200).type(streaming === 'ndjson' ? 'application/x-ndjson' : 'text/event-stream');
    send({ event: 'started', execId: handle.execId, sessionId: param(req, 'id') });
    send({ event: 'result', ...(await handle.result) });
    res.end();
  });
  router.get('/sessions/:id/exec/:execId', async (req, res) => {
    res.json(await sessions.execResult(param(req, 'id'), param(req, 'execId'), principalOfRequest(req)));
  });
  router.delete('/sessions/:id/exec/:execId', async (req, res) => {
    res.json(await sessions.killExec(param(req, 'id'), param(req, 'execId'), principalOfRequest(req)));
  });
  router.get('/sessions/:id/logs', async (req, res) => {
    res.json({ execs: await sessions.logs(param(req, 'id'), principalOfRequest(req)) });
  });
  return router;
}
