/** `sandpit doctor`: is this machine ready, and if not, the exact fix for each missing piece. */
import { DockerBackend } from '../backends/docker/docker-backend.js';
import { auditFileFor } from '../config/audit.js';
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { createAuditTrail } from '../observability/audit-trail.js';
import { silentLogger } from '../observability/logger.js';
import { toAppError } from '../shared/errors.js';
import { parse, printHelp } from './args.js';
import { kubernetesBackend, ociBackend } from './wiring.js';

export const DOCTOR_USAGE = `
usage: sandpit doctor [--json] [--config PATH]

Checks Node.js, the configuration, the audit file, the Docker engine, the sandbox images and the
configured runtime, and names the fix for each missing piece. Exits 0 when everything is ready.
With sandbox.backend: kubernetes it checks the cluster instead: the API server, the CRD, the
operator's Lease, and the gateway's permissions in its namespace and in every namespace a token
is mapped to (auth.tokens[].namespace). With sandbox.backend: oci it checks that this machine can
run containers with the OCI runtime directly: root, cgroups, runc and runsc (their versions), and
the sandbox images in the local engine.
`;

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  fix?: string;
}

export async function doctorCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, { json: { type: 'boolean' }, config: { type: 'string' } }, DOCTOR_USAGE);
  if (values.help) {
    printHelp(DOCTOR_USAGE);
    return 0;
  }
  const checks = await runChecks(values.config);
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ ok: checks.every((c) => c.ok), checks }, null, 2)}\n`);
  } else {
    for (const c of checks) {
      process.stdout.write(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name.padEnd(8)} ${c.detail}\n`);
      if (!c.ok && c.fix) process.stdout.write(`     fix: ${c.fix}\n`);
    }
    process.stdout.write(checks.every((c) => c.ok) ? 'ready\n' : 'not ready\n');
  }
  return checks.every((c) => c.ok) ? 0 : 1;
}

async function runChecks(configPath: string | undefined): Promise<Check[]> {
  const checks: Check[] = [nodeCheck()];
  let config: Config;
  try {
    config = loadConfig({ env: process.env, ...(configPath ? { configPath } : {}) });
    checks.push({ name: 'config', ok: true, detail: `valid (backend ${config.sandbox.backend})` });
  } catch (e) {
    checks.push({
      name: 'config',
      ok: false,
      detail: toAppError(e).message,
      fix: 'correct the settings named above',
    });
    return checks;
  }
  checks.push(await auditCheck(config));
  if (config.sandbox.backend === 'kubernetes') {
    checks.push(await clusterCheck(config));
    return checks;
  }
  if (config.sandbox.backend === 'oci') {
    checks.push(...(await ociChecks(config)));
    return checks;
  }
  const backend = new DockerBackend({ socketPath: config.docker.socketPath });
  const health = await backend.health();
  if (!health.images) {
    checks.push({
      name: 'engine',
      ok: false,
      detail: health.detail,
      fix: 'sandpit setup (as root) installs and starts the engine',
    });
    return checks;
  }
  checks.push({ name: 'engine', ok: true, detail: `Docker engine at ${config.docker.socketPath}` });
  const { missing, present } = health.images;
  checks.push(
    missing.length
      ? {
          name: 'images',
          ok: false,
          detail: `missing ${missing.join(', ')}`,
          fix: 'sandpit images build (as root; no registry needed)',
        }
      : { name: 'images', ok: true, detail: present.join(', ') },
  );
  const runtimes = health.runtimes ?? [];
  const wanted = config.sandbox.runtime;
  if (wanted && !runtimes.includes(wanted)) {
    checks.push({
      name: 'runtime',
      ok: false,
      detail: `configured runtime ${wanted} is not registered (engine has ${runtimes.join(', ')})`,
      fix:
        wanted === 'runsc'
          ? 'sandpit setup registers runsc (gVisor)'
          : `register ${wanted} in /etc/docker/daemon.json`,
    });
  } else {
    checks.push({
      name: 'runtime',
      ok: true,
      detail: `${wanted ?? 'engine default'}; available: ${runtimes.join(', ')}${runtimes.includes('runsc') ? '' : ' (gVisor: sandpit setup)'}`,
    });
  }
  return checks;
}

/**
 * Whether this machine can run the oci backend: root, cgroups, runc and its version, runsc's
 * version (gVisor, optional unless it is the configured runtime), and the sandbox images.
 */
async function ociChecks(config: Config): Promise<Check[]> {
  const backend = ociBackend(config);
  const host = await backend.checkHost();
  const health = await backend.health();
  const wantsRunsc = config.sandbox.runtime === 'runsc';
  const missing = health.images?.missing ?? [];
  return [
    host.root
      ? { name: 'root', ok: true, detail: 'running as root' }
      : { name: 'root', ok: false, detail: 'not root', fix: 'run the oci backend as root' },
    host.cgroups
      ? { name: 'cgroups', ok: true, detail: host.cgroups }
      : { name: 'cgroups', ok: false, detail: 'no memory controller', fix: 'mount the cgroup hierarchy' },
    host.runc
      ? { name: 'runc', ok: true, detail: `${host.runc} at ${config.oci.runcPath}` }
      : { name: 'runc', ok: false, detail: `no runc at ${config.oci.runcPath}`, fix: 'apt-get install runc' },
    host.runsc
      ? { name: 'runsc', ok: true, detail: `${host.runsc} at ${config.oci.runscPath} (gVisor)` }
      : {
          name: 'runsc',
          ok: !wantsRunsc,
          detail: `no runsc at ${config.oci.runscPath}${wantsRunsc ? '' : ' (gVisor is optional)'}`,
          fix: 'apt-get install runsc',
        },
    missing.length
      ? {
          name: 'images',
          ok: false,
          detail: `missing ${missing.join(', ')}`,
          fix: 'sandpit images build (as root; the oci backend unpacks the local engine’s images)',
        }
      : { name: 'images', ok: true, detail: (health.images?.present ?? []).join(', ') },
  ];
}

/** The Kubernetes backend's health: the cluster, the operator, and the permissions in every namespace. */
async function clusterCheck(config: Config): Promise<Check> {
  try {
    const { backend } = await kubernetesBackend({ config, logger: silentLogger() });
    const health = await backend.health();
    await backend.close();
    return health.ok
      ? { name: 'cluster', ok: true, detail: health.detail }
      : { name: 'cluster', ok: false, detail: health.detail, fix: 'each problem above names its fix' };
  } catch (e) {
    const err = toAppError(e);
    return { name: 'cluster', ok: false, detail: err.message, ...(err.hint ? { fix: err.hint } : {}) };
  }
}

/** The audit file opens for appending (created if need be), as the gateway's gate will require. */
async function auditCheck(config: Config): Promise<Check> {
  const file = auditFileFor(config, process.env, 'gateway');
  if (!file)
    return { name: 'audit', ok: true, detail: 'no audit file (audit.enabled: false); records go to the log' };
  const trail = createAuditTrail({ logger: silentLogger(), file });
  await trail.open();
  try {
    trail.assertAvailable();
    return { name: 'audit', ok: true, detail: `writable: ${file.path}` };
  } catch (e) {
    const err = toAppError(e);
    return { name: 'audit', ok: false, detail: err.message, ...(err.hint ? { fix: err.hint } : {}) };
  } finally {
    await trail.close();
  }
}

function nodeCheck(): Check {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  const ok = major > 20 || (major === 20 && minor >= 19);
  return ok
    ? { name: 'node', ok, detail: `Node.js ${process.versions.node}` }
    : {
        name: 'node',
        ok,
        detail: `Node.js ${process.versions.node} is too old`,
        fix: 'install Node.js 20.19 or newer',
      };
}
