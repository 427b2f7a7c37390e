/** GET /health: unauthenticated liveness and readiness; 503 when sandboxes cannot start. Reveals no run data. */
import type { Request, Response } from 'express';
import type { SandpitService } from '../service.js';

export function healthRoute(service: SandpitService, version: string) {
  return async (_req: Request, res: Response): Promise<void> => {
    const h = await service.health();
    res.status(h.ok ? 200 : 503).json({
      status: h.ok ? 'ok' : 'unavailable',
      version,
      backend: h.backend,
      detail: h.detail,
      running: h.running,
      queued: h.queued,
    });
  };
}
