/**
 * Test support for the Docker tier: a real engine or a loud failure that says how to start it.
 * Never skips.
 */
import { execFileSync } from 'node:child_process';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import { RunRequestSchema, type RunRequestInput, type RunResult } from '../../src/api/run.js';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import type { SandboxBackend } from '../../src/backends/types.js';
import { LABELS, OWNED_FILTERS } from '../../src/backends/docker/labels.js';
import { DEFAULT_POOL_OPTIONS } from '../../src/backends/docker/pool/pool-options.js';
import { sessionShape } from '../../src/backends/docker/session/docker-sessions.js';
import { BUILTIN_TEMPLATES, type Template } from '../../src/policy/templates.js';
import { sessionSpec } from './sessions.js';
import { evaluate, type EffectiveSpec } from '../../src/policy/evaluate.js';
import { createPolicy, type Policy, type PolicyOptions } from '../../src/policy/policy.js';

export const SOCKET = process.env.SANDPIT_DOCKER_SOCKET_PATH ?? '/var/run/docker.sock';
export const START_HINT =
  'start it with: bash test/env/docker.sh up   (installs docker.io, starts dockerd, builds the images)';

let checked: Promise<Docker> | undefined;

/** The engine, with every sandbox image present; throws with the command to fix it otherwise. */
export function requireDocker(): Promise<Docker> {
  checked ??= (async () => {
    const docker = new Docker({ socketPath: SOCKET });
    try {
      await docker.ping();
    } catch (e) {
      throw new Error(`no Docker engine answers on ${SOCKET} (${(e as Error).message}); ${START_HINT}`, {
        cause: e,
      });
    }
    const health = await new DockerBackend({ docker }).health();
    if (!health.ok) throw new Error(`${health.detail}; ${START_HINT}`);
    return docker;
  })();
  return checked;
}

/**
 * The templates a test runs: the built-in ones, or, with SANDPIT_TEST_IMAGE_REPO=<repo>, the same
 * templates on `<repo>/<name>:<tag>` images, so that a worktree whose runner differs tests its own
 * build (tagged apart with `docker tag`) while another worktree on the machine rebuilds sandpit/*.
 */
export function testTemplates(): Template[] {
  const repo = process.env.SANDPIT_TEST_IMAGE_REPO;
  return BUILTIN_TEMPLATES.map((t) =>
    repo ? { ...t, image: t.image.replace(/^sandpit\//, `${repo}/`) } : t,
  );
}

export function spec(request: RunRequestInput, options: PolicyOptions = {}): EffectiveSpec {
  return specWith(request, createPolicy(options));
}

export function specWith(request: RunRequestInput, policy: Policy): EffectiveSpec {
  const evaluation = evaluate(RunRequestSchema.parse(request), policy);
  if (!evaluation.ok) throw new Error(`test request denied: ${JSON.stringify(evaluation.violations)}`);
  return evaluation.spec;
}

/**
 * The backend the Docker tier tests: cold by default, or with warm pools pre-warmed for every
 * template when SANDPIT_TEST_POOL=on, so the same suite proves both paths.
 */
export const POOLS_ON = process.env.SANDPIT_TEST_POOL === 'on';

export async function makeBackend(docker?: Docker): Promise<DockerBackend> {
  const engine = docker ?? (await requireDocker());
  if (!POOLS_ON) return new DockerBackend({ docker: engine });
  const backend = new DockerBackend({
    docker: engine,
    pool: { ...DEFAULT_POOL_OPTIONS, minIdle: 1, maxSize: 4 },
  });
  backend.pool?.start(
    BUILTIN_TEMPLATES.map((t) => spec({ template: t.name, code: '' })),
    // Session pools (StdinOnce false, the runner in session mode) for the sessions the tier makes most.
    ['python', 'bash'].map((template) => sessionShape(sessionSpec({ template }))),
  );
  if (!(await backend.pool?.filled(60_000))) throw new Error('the warm pools did not fill within 60 s');
  return backend;
}

let counter = 0;
export function runId(prefix = 't'): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter++}`;
}

/** Runs a request to its result and waits until its container is gone. */
export async function runToEnd(
  backend: SandboxBackend,
  request: RunRequestInput,
  options: PolicyOptions = {},
): Promise<RunResult> {
  const execution = backend.start(spec(request, options), { runId: runId() });
  const result = await execution.result;
  await execution.cleanedUp;
  return result;
}

/**
 * Names of sandpit containers that exist right now (any state), optionally only the one serving a
 * run: a cold container carries the run's label, a warm one is renamed after the run when claimed.
 */
export async function sandpitContainers(docker: Docker, runIdFilter?: string): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: OWNED_FILTERS } });
  return list
    .filter(
      (c) =>
        !runIdFilter ||
        c.Labels['sandpit.dev/run'] === runIdFilter ||
        c.Names.includes(`/sandpit-run-${runIdFilter}`),
    )
    .map((c) => c.Names[0] ?? c.Id);
}

/**
 * The run's containers, once there are `count` of them (or the time is up): a warm claim renames
 * its pool container after the run without waiting, so the name can land after the run has begun.
 */
export async function runContainers(
  docker: Docker,
  id: string,
  count: number,
  timeoutMs = 3000,
): Promise<string[]> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const found = await sandpitContainers(docker, id);
    if (found.length >= count || performance.now() > deadline) return found;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Names of the containers `owner` (a DockerBackend's owner label) created from `sinceMs` until now,
 * by the engine's own events: a container made and removed meanwhile counts too.
 */
export async function createdSince(docker: Docker, owner: string, sinceMs: number): Promise<string[]> {
  const stream = (await docker.getEvents({
    since: sinceMs / 1000,
    until: Date.now() / 1000,
    filters: { type: ['container'], event: ['create'], label: [`${LABELS.owner}=${owner}`] },
  })) as unknown as Readable;
  const names: string[] = [];
  for await (const chunk of stream) {
    for (const line of String(chunk).split('\n').filter(Boolean)) {
      const event = JSON.parse(line) as { Actor: { Attributes: Record<string, string> } };
      names.push(event.Actor.Attributes.name ?? '?');
    }
  }
  return names;
}

export function hostRss(): number {
  return process.memoryUsage().rss;
}

/** Runs a shell command on the host and returns its wall time in ms. */
export function timeHostCommand(cmd: string): number {
  const t0 = performance.now();
  execFileSync('/bin/sh', ['-c', cmd], { stdio: 'ignore' });
  return performance.now() - t0;
}
