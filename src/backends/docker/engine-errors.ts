/** Docker Engine failures as typed errors, each with the fix a user needs. */
import { AppError } from '../../shared/errors.js';

interface EngineFailure {
  statusCode?: number;
  code?: string;
  message?: string;
  json?: { message?: string } | null;
}

export const ENGINE_HINT =
  'start the engine with `sandpit setup` (as root), then check with `sandpit doctor`';

export function engineError(e: unknown, context: { image?: string; runtime?: string | undefined }): AppError {
  if (e instanceof AppError) return e;
  const f = (e ?? {}) as EngineFailure;
  const detail = f.json?.message ?? f.message ?? String(e);
  if (f.code === 'ECONNREFUSED' || f.code === 'ENOENT' || f.code === 'EACCES' || f.code === 'ECONNRESET') {
    return new AppError('ENGINE_UNAVAILABLE', `the Docker engine is not answering (${f.code}: ${detail})`, {
      hint: ENGINE_HINT,
      cause: e,
    });
  }
  if (/unknown runtime|runtime .* not found|unknown or invalid runtime/i.test(detail)) {
    return new AppError(
      'RUNTIME_NOT_FOUND',
      `the engine has no runtime "${context.runtime ?? '?'}": ${detail}`,
      {
        hint: 'register it in /etc/docker/daemon.json (`sandpit setup` registers runsc), or choose another runtime',
        cause: e,
      },
    );
  }
  if (f.statusCode === 404 && /no such image|not found|pull access denied/i.test(detail)) {
    return new AppError('IMAGE_NOT_FOUND', `image ${context.image ?? '?'} is not present in the engine`, {
      hint: 'build the sandbox images with `sandpit images build` (no registry needed), or pull the image yourself',
      cause: e,
    });
  }
  return new AppError('BACKEND_ERROR', `Docker engine error: ${detail}`, { cause: e });
}
