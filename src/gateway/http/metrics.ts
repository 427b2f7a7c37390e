/** GET /metrics: Prometheus text from the gateway's own registry. */
import type { Request, Response } from 'express';
import type { Metrics } from '../../observability/metrics.js';

export function metricsRoute(metrics: Metrics) {
  return async (_req: Request, res: Response): Promise<void> => {
    res.setHeader('Content-Type', metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  };
}
