/**
 * A hostile target over the gateway's service, the same on every backend: a request runs as a
 * one-shot run, or as one exec in a session made for it (its code written to the workspace) and
 * deleted after; and the target remembers which runs and sessions it made, for leftovers(). A warm
 * configuration that was served cold (or a cold one served warm) throws: the matrix never tries
 * a path other than the one its label names.
 */
import { Buffer } from 'node:buffer';
import type { SandpitService } from '../../src/gateway/service.js';
import type { Metrics } from '../../src/observability/metrics.js';
import { BUILTIN_TEMPLATES, CODE_DIR, WORKSPACE } from '../../src/policy/templates.js';
import { PRINCIPAL } from '../contract/target.js';
import {
  configLabel,
  type HostileConfig,
  type Ran,
  type Untrusted,
  type UntrustedRequest,
} from './untrusted.js';

/** The runs and sessions a target made. */
export interface Made {
  runs: string[];
  sessions: string[];
}

export interface ServiceTargetParts {
  config: HostileConfig;
  service: SandpitService;
  /** The service's metrics: how each session was served (sandpit_sessions_created_total). */
  metrics: Metrics;
  /** What the gateway and the operator hold that no sandbox may see, by name. */
  secrets: Readonly<Record<string, string>>;
  /** gVisor's name here: the runtime (Docker, oci) or the RuntimeClass (Kubernetes). */
  gvisorRuntime: string;
  /** Resolves once a sandbox of this configuration can be served as it says (warm: a pool has one ready). */
  ready?(): Promise<void>;
  /** The sandboxes of these runs and sessions that exist now. */
  leftovers(made: Made): Promise<string[]>;
  close?(): Promise<void>;
}

async function warmSessions(metrics: Metrics): Promise<number> {
  const { values } = await metrics.sessionsCreated.get();
  return values.filter((v) => v.labels.served === 'warm').reduce((n, v) => n + v.value, 0);
}

/** The template's command with its code file in the workspace, where a session's exec finds it. */
function sessionCommand(template: string): { file: string; command: string[] } {
  const t = BUILTIN_TEMPLATES.find((x) => x.name === template);
  if (!t) throw new Error(`no template ${template}`);
  return {
    file: t.fileName,
    command: t.command.map((a) => a.replaceAll(`${CODE_DIR}/`, `${WORKSPACE}/`)),
  };
}

export function serviceTarget(parts: ServiceTargetParts): Untrusted {
  const { config, service, metrics } = parts;
  const made: Made = { runs: [], sessions: [] };
  const runtime = config.gvisor ? { runtime: parts.gvisorRuntime } : {};
  const expected = config.warm ? 'warm' : 'cold';
  const label = configLabel(config);
  const wrongPath = (served: string): Error =>
    new Error(`${label}: served ${served}, not ${expected}: this configuration was not tried`);

  async function run(request: UntrustedRequest): Promise<Ran> {
    await parts.ready?.();
    const handle = await service.runs.start({ template: 'python', ...request, ...runtime }, PRINCIPAL);
    made.runs.push(handle.runId);
    const { runId: _, ...ran } = await handle.result;
    if (ran.phase !== 'Rejected' && (ran.served ?? 'cold') !== expected)
      throw wrongPath(ran.served ?? 'cold');
    return ran;
  }

  async function exec(request: UntrustedRequest): Promise<Ran> {
    const {
      template = 'python',
      image,
      resources,
      network,
      code,
      command,
      files,
      stdin,
      env,
      timeoutSeconds,
    } = request;
    if (request.outputs !== undefined || request.requestId !== undefined)
      throw new Error('outputs and requestId are a run’s, not a session exec’s');
    await parts.ready?.();
    const warmBefore = await warmSessions(metrics);
    const session = await service.sessions.create(
      {
        template,
        ...(image ? { image } : {}),
        ...(resources ? { resources } : {}),
        ...(network ? { network } : {}),
        ...runtime,
      },
      PRINCIPAL,
    );
    made.sessions.push(session.id);
    try {
      const served = (await warmSessions(metrics)) > warmBefore ? 'warm' : 'cold';
      if (served !== expected) throw wrongPath(served);
      for (const f of files ?? [])
        await service.sessions.writeFile(session.id, PRINCIPAL, {
          path: f.path,
          content: Buffer.from(f.content, f.encoding ?? 'utf8'),
          ...(f.executable ? { mode: 0o755 } : {}),
        });
      let argv = command;
      if (code !== undefined) {
        const main = sessionCommand(template);
        await service.sessions.writeFile(session.id, PRINCIPAL, {
          path: main.file,
          content: Buffer.from(code),
        });
        argv ??= main.command;
      }
      if (!argv) throw new Error('give code or command');
      const handle = service.sessions.exec(session.id, PRINCIPAL, {
        command: argv,
        ...(stdin !== undefined ? { stdin } : {}),
        ...(env ? { env } : {}),
        ...(timeoutSeconds ? { timeoutSeconds } : {}),
      });
      const { execId: _e, sessionId: _s, ...ran } = await handle.result;
      return { ...ran, served };
    } finally {
      await service.sessions.delete(session.id, PRINCIPAL);
    }
  }

  return {
    config,
    label,
    service,
    secrets: parts.secrets,
    run: config.path === 'run' ? run : exec,
    leftovers: () => parts.leftovers(made),
    close: async () => parts.close?.(),
  };
}
