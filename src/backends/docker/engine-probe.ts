/**
 * Whether the Docker engine answers right now, asked on a connection of its own. The Engine API
 * client keeps its connections alive, and a dockerd that is shutting down still serves the ones it
 * has: it closes its listener first, then stops every container (live-restore off), and only then
 * exits. So only a new connection tells, at the moment a container ends, that the engine is going
 * away and took the container with it.
 */
import { request } from 'node:http';
import type Docker from 'dockerode';

/** How long a probe waits for the engine's answer. */
const PROBE_TIMEOUT_MS = 2000;

/** The modem of a dockerode client or container: where the engine listens. */
interface EngineAddress {
  socketPath?: unknown;
}

/** True when the engine at `modem` (a client's or a container's) answers `/_ping` on a new connection. */
export async function engineAnswers(
  modem: EngineAddress,
  fallback: () => Promise<unknown>,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<boolean> {
  if (typeof modem.socketPath !== 'string') {
    // An engine over TCP or SSH: its client's own ping (a new connection is not guaranteed there).
    return fallback().then(
      () => true,
      () => false,
    );
  }
  const socketPath = modem.socketPath;
  return new Promise<boolean>((resolve) => {
    // agent: false: a connection of this request alone, never one the client keeps alive.
    const req = request({ socketPath, path: '/_ping', agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** The engine behind a container, probed as engineAnswers does. */
export function containerEngineAnswers(container: Docker.Container): Promise<boolean> {
  return engineAnswers(container.modem as EngineAddress, () => container.inspect());
}
