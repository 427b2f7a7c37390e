/** Which gateway this is, for its sessions: `server.instanceId`, else its state directory. */
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import type { Config } from './schema.js';

type Env = Readonly<Record<string, string | undefined>>;

/** `${XDG_STATE_HOME:-~/.local/state}/sandpit` (a relative XDG_STATE_HOME is ignored, as the spec says). */
export function defaultStateDir(env: Env): string {
  const state = env.XDG_STATE_HOME;
  const base = state && isAbsolute(state) ? state : join(env.HOME || homedir(), '.local', 'state');
  return join(base, 'sandpit');
}

/** The instance id a gateway's sessions carry: a gateway started with the same one adopts them. */
export function instanceIdOf(config: Config, env: Env): string {
  return config.server.instanceId ?? defaultStateDir(env);
}
