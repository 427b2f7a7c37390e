/** How much a request may carry: file and variable counts, the workspace, and the request's total size. Pure. */
import type { EffectiveLimits, RunRequest } from '../api/run.js';
import { formatSize } from '../shared/quantity.js';
import type { Decision } from './decision.js';

/** The request's payload, decoded. */
export interface Payload {
  files: { content: Buffer }[];
  code: Buffer | undefined;
  stdin: Buffer;
}

export function checkSizes(
  request: RunRequest,
  payload: Payload,
  limits: EffectiveLimits,
  d: Decision,
): void {
  const c = d.policy.ceilings;
  if (request.files.length > c.files) {
    d.deny({
      field: 'files',
      message: `${request.files.length} files is over the limit of ${c.files}`,
      limit: c.files,
    });
  }
  if (request.env.length > c.envVars) {
    d.deny({
      field: 'env',
      message: `${request.env.length} variables is over the limit of ${c.envVars}`,
      limit: c.envVars,
    });
  }
  const fileBytes = payload.files.reduce((n, f) => n + f.content.length, 0);
  if (fileBytes > limits.workspaceBytes) {
    d.deny({
      field: 'files',
      message: `files total ${formatSize(fileBytes)}, more than the workspace holds (${formatSize(limits.workspaceBytes)})`,
      limit: formatSize(limits.workspaceBytes),
    });
  }
  const total = fileBytes + (payload.code?.length ?? 0) + payload.stdin.length + argvAndEnvBytes(request);
  if (total > c.requestBytes) {
    d.deny({
      field: 'request',
      message: `code, files, stdin, argv and env total ${formatSize(total)}, over the limit of ${formatSize(c.requestBytes)}`,
      limit: formatSize(c.requestBytes),
      requested: formatSize(total),
    });
  }
}

function argvAndEnvBytes(request: RunRequest): number {
  const argv = (request.command ?? []).reduce((n, a) => n + Buffer.byteLength(a) + 1, 0);
  const env = request.env.reduce((n, e) => n + Buffer.byteLength(e.name) + Buffer.byteLength(e.value) + 2, 0);
  return argv + env;
}
