/**
 * Test support for sessions on the Docker backend: evaluated specs, execs run to their result,
 * and the session containers that exist. Drives the backend's session port directly.
 */
import {
  ExecRequestSchema,
  SessionRequestSchema,
  type ExecRequestInput,
  type SessionRequestInput,
} from '../../src/api/session.js';
import type { OutputChunk } from '../../src/runner/capture.js';
import type { ExecOptions, ExecOutcome, SessionSandbox } from '../../src/backends/sessions.js';
import type Docker from 'dockerode';
import { LABELS, MANAGED_FILTER } from '../../src/backends/docker/labels.js';
import { createPolicy, type Policy, type PolicyOptions } from '../../src/policy/policy.js';
import {
  evaluateExec,
  evaluateSession,
  type EffectiveExec,
  type EffectiveSessionSpec,
} from '../../src/policy/session.js';

export const MiB = 1024 ** 2;

export function sessionPolicy(options: PolicyOptions = {}): Policy {
  return createPolicy(options);
}

export function sessionSpec(
  request: SessionRequestInput,
  policy: Policy = sessionPolicy(),
): EffectiveSessionSpec {
  const evaluation = evaluateSession(SessionRequestSchema.parse(request), policy);
  if (!evaluation.ok) throw new Error(`test session denied: ${JSON.stringify(evaluation.violations)}`);
  return evaluation.spec;
}

export function execSpec(
  request: ExecRequestInput,
  session: EffectiveSessionSpec,
  policy: Policy = sessionPolicy(),
): EffectiveExec {
  const evaluation = evaluateExec(ExecRequestSchema.parse(request), session, policy);
  if (!evaluation.ok) throw new Error(`test exec denied: ${JSON.stringify(evaluation.violations)}`);
  return evaluation.exec;
}

let counter = 0;
export function sessionId(prefix = 's'): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter++}`;
}

export interface ExecRun extends ExecOutcome {
  chunks: OutputChunk[];
}

/** Runs one exec to its result, collecting what it streamed. */
export async function runExec(
  sandbox: SessionSandbox,
  spec: EffectiveSessionSpec,
  request: ExecRequestInput,
  options: Partial<ExecOptions> & { policy?: Policy } = {},
): Promise<ExecRun> {
  const chunks: OutputChunk[] = [];
  const execution = sandbox.exec(execSpec(request, spec, options.policy), {
    execId: options.execId ?? `e${counter++}`,
    onOutput: (c) => {
      chunks.push(c);
      options.onOutput?.(c);
    },
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.streamStdin ? { streamStdin: true } : {}),
  });
  return { ...(await execution.result), chunks };
}

/** The session's containers (any state), by the session id on their labels or names. */
export async function sessionContainers(docker: Docker, id: string): Promise<Docker.ContainerInfo[]> {
  const all = await docker.listContainers({
    all: true,
    filters: { label: [MANAGED_FILTER, `${LABELS.mode}=session`] },
  });
  return all.filter((c) => c.Labels[LABELS.session] === id || c.Names.includes(`/sandpit-session-${id}`));
}

/** Waits until `check` holds, polling; false when `ms` pass first. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  ms: number,
  intervalMs = 100,
): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (performance.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Reads a whole download. */
export async function readAll(data: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of data) parts.push(c);
  return Buffer.concat(parts);
}
