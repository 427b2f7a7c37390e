/**
 * One-shot runs over REST: `POST /runs` (the run request; waits for the result, or with
 * `?wait=false` answers 202 once the run is recorded), `GET /runs/:id`, and `DELETE /runs/:id` to cancel. A waiting
 * client that goes away cancels its run, as on every transport (docs/mcp.md, disconnects). The files
 * a run returned: `GET /runs/:id/files/*path` (one, with its media type, never run by a browser) and
 * `GET /runs/:id/artifacts` (all of them as a tar stream).
 */
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { Router } from 'express';
import type { SandpitService } from '../service.js';
import { primed } from './primed.js';
import { param, principalOfRequest, type requireJson } from './request.js';

export function runRoutes(service: SandpitService, json: ReturnType<typeof requireJson>): Router {
  const router = Router();
  router.post('/runs', json, async (req, res) => {
    const principal = principalOfRequest(req);
    if (req.query.wait === 'false') {
      const run = await service.runs.submit(req.body, principal);
      res.status(202).location(`/runs/${run.runId}`).json(run);
      return;
    }
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort(new Error('the client went away'));
    });
    res.json(await service.runs.run(req.body, principal, { signal: controller.signal }));
  });
  router.get('/runs/:id', async (req, res) => {
    res.json(await service.runs.get(req.params.id, principalOfRequest(req)));
  });
  router.delete('/runs/:id', async (req, res) => {
    res.json(await service.runs.cancel(req.params.id, principalOfRequest(req)));
  });
  router.get('/runs/:id/files/*path', async (req, res) => {
    const { file, data } = await service.runFiles.read(
      param(req, 'id'),
      param(req, 'path'),
      principalOfRequest(req),
    );
    // What the sandbox wrote is served as data: never sniffed, never run as a page (an SVG or HTML).
    res
      .status(200)
      .type(file.mimeType)
      .setHeader('X-Content-Type-Options', 'nosniff')
      .setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; sandbox")
      .send(data);
  });
  router.get('/runs/:id/artifacts', async (req, res) => {
    const tar = await primed(await service.runFiles.artifacts(param(req, 'id'), principalOfRequest(req)));
    res.status(200).type('application/x-tar');
    res.setHeader('Content-Disposition', `attachment; filename="${param(req, 'id')}.tar"`);
    await pipeline(Readable.from(tar), res);
  });
  return router;
}
