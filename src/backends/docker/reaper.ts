/**
 * Removes what crashed callers left behind: run and pool containers whose owner died or whose
 * expiry passed. Session containers are another matter: a session outlives its gateway, and the
 * next gateway of its instance adopts it. So a session container is removed only once nobody can
 * use it: it stopped (its runner ended it, at its TTL at the latest), and its own gateway is
 * gone; or it belongs to no instance (a stdio gateway's) and its owner died. Each session removed
 * so is reported, so that it can be audited.
 */
import type Docker from 'dockerode';
import type { LostSession } from '../sessions.js';
import { LABELS, OWNED_FILTERS } from './labels.js';
import { ownerAlive } from './owner.js';
import { namedSession } from './session/docker-sessions.js';
import { sessionEnd } from '../../runner/session-end.js';

export interface ReapOptions {
  now?: number;
  /** This gateway's instance: its running sessions are adoption's, not the reaper's. */
  instanceId?: string | undefined;
  /** Containers this process holds (its live sessions): never touched. */
  live?: ReadonlySet<string>;
  /**
   * Whether this instance's stopped sessions are the reaper's too (periodic passes). At start-up
   * they are adoption's, which reports them with the ones whose runner no longer answers.
   */
  includeOwn?: boolean;
}

export interface ReapResult {
  /** Names of the containers removed. */
  removed: string[];
  /** The sessions among them. */
  sessions: LostSession[];
}

type Verdict = 'keep' | 'remove' | 'session';
const RUNNING = new Set(['running', 'paused', 'restarting']);

function verdict(c: Docker.ContainerInfo, options: ReapOptions, now: number): Verdict {
  const owner = c.Labels[LABELS.owner];
  const ownerGone = owner !== undefined && !ownerAlive(owner);
  const expired = Number(c.Labels[LABELS.expires] ?? Infinity) < now;
  if (c.Labels[LABELS.mode] !== 'session') return expired || ownerGone ? 'remove' : 'keep';
  if (options.live?.has(c.Id)) return 'keep';
  // A session's runner enforces its TTL itself, so a running one is never expired here (a pool's
  // label, set before it was claimed, says nothing of the session); a stopped one past it is done.
  if (expired && !RUNNING.has(c.State)) return 'session';
  return sessionVerdict(c, options, ownerGone);
}

function sessionVerdict(c: Docker.ContainerInfo, options: ReapOptions, ownerGone: boolean): Verdict {
  const instance = c.Labels[LABELS.instance];
  if (instance === undefined) return ownerGone ? 'session' : 'keep';
  // Running: an instance's live session, its gateway's now or after a restart.
  if (RUNNING.has(c.State)) return 'keep';
  // Stopped: this instance's (and not held) on a periodic pass; another's once its owner is gone.
  if (instance === options.instanceId) return options.includeOwn ? 'session' : 'keep';
  return ownerGone ? 'session' : 'keep';
}

export async function reapLeftovers(docker: Docker, options: ReapOptions = {}): Promise<ReapResult> {
  const now = options.now ?? Date.now();
  const containers = await docker.listContainers({ all: true, filters: { label: OWNED_FILTERS } });
  const result: ReapResult = { removed: [], sessions: [] };
  await Promise.all(
    containers.map(async (c) => {
      const v = verdict(c, options, now);
      if (v === 'keep') return;
      const lost = v === 'session' ? await lostSession(docker, c) : undefined;
      await docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => {});
      result.removed.push(c.Names[0]?.replace(/^\//, '') ?? c.Id);
      if (lost) result.sessions.push(lost);
    }),
  );
  return result;
}

/** What a session container says of its session before it goes; undefined for one never opened. */
async function lostSession(docker: Docker, c: Docker.ContainerInfo): Promise<LostSession | undefined> {
  const named = namedSession(c);
  if (!named.sessionId) return undefined;
  if (c.State === 'running') {
    return { ...named, reason: 'RunnerGone', message: 'its gateway died, and no other adopts its sessions' };
  }
  const info = await docker
    .getContainer(c.Id)
    .inspect()
    .catch(() => undefined);
  if (!info) return { ...named, reason: 'RunnerGone', message: 'the session container is gone' };
  const end = sessionEnd({ exitCode: info.State.ExitCode, oomKilled: info.State.OOMKilled });
  return end && { ...named, ...end };
}

/**
 * After the engine was away (live-restore off: every container it had died with it), removes the
 * containers of `owner` (this process) that were made before it went away and are not running.
 * Whoever used them saw them end, and the removals tried while the engine was away failed; running
 * ones (the engine was only unreachable) are still in use. Returns the containers' names.
 */
export async function reapAfterEngineLoss(
  docker: Docker,
  { owner, lostAt }: { owner: string; lostAt: number },
): Promise<string[]> {
  const containers = await docker.listContainers({
    all: true,
    filters: { label: [...OWNED_FILTERS, `${LABELS.owner}=${owner}`] },
  });
  const removed: string[] = [];
  await Promise.all(
    containers
      .filter((c) => !RUNNING.has(c.State))
      .map(async (c) => {
        const container = docker.getContainer(c.Id);
        // The listing's creation time is in whole seconds; inspect's is exact.
        const info = await container.inspect().catch(() => undefined);
        if (!info || !madeBefore(info.Created, lostAt)) return;
        await container.remove({ force: true, v: true }).catch(() => {});
        removed.push(c.Names[0]?.replace(/^\//, '') ?? c.Id);
      }),
  );
  return removed;
}

/** Whether a container made at `created` (the engine's RFC 3339 time, to the nanosecond) predates `at`. */
export function madeBefore(created: string, at: number): boolean {
  const t = Date.parse(created);
  return Number.isFinite(t) && t < at;
}
