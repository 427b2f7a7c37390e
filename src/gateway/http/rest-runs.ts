/**
 * One-shot runs over REST: `POST /runs` (the run request; waits for the result, or with
 * `?wait=false` answers 202 once the run is recorded), `GET /runs/:id`, and `DELETE /runs/:id` to cancel. A waiting
 * client that goes away cancels its run, as on every transport (docs/mcp.md, disconnects).
 */
import { Router } from 'express';
import type { SandpitService } from '../service.js';
import { principalOfRequest, type requireJson } from './request.js';

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
  return router;
}
