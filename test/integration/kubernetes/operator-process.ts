// One `sandpit operator` process under test: the real command as a child process, with the cluster
// script's static operator identity (never admin), a config written for the test's namespace, and
// its JSON log parsed as it arrives.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import type { KubeCluster } from '../../support/kube/index.js';
import { BUILT_CLI, ensureBuilt } from '../../support/built-cli.js';
import { REPO_ROOT } from '../../support/kube/env.js';

export interface OperatorConfig {
  namespace: string;
  identity?: string;
  /** Extra `kubernetes:` settings (the cluster's, both sides read them). */
  kubernetes?: Record<string, unknown>;
  /** Extra `kubernetes.operator:` settings. */
  operator?: Record<string, unknown>;
  sandbox?: Record<string, unknown>;
  /** An `auth:` section (the hostile tier puts a canary token there, which no sandbox may see). */
  auth?: Record<string, unknown>;
}

/** The config every test operator starts from: local images only, the test namespace, short leases. */
export function operatorConfig(c: OperatorConfig): Record<string, unknown> {
  return {
    sandbox: { imageAllowlist: ['sandpit/*'], ...c.sandbox },
    kubernetes: {
      ...c.kubernetes,
      operator: {
        namespaces: [c.namespace],
        imagePullPolicy: 'Never', // nothing may be pulled: the network rule
        leaseNamespace: c.namespace,
        leaseDurationSeconds: 6,
        renewDeadlineSeconds: 4,
        retryPeriodSeconds: 1,
        probePort: 0,
        // Declared, as a cluster whose network plugin enforces NetworkPolicy would: the test
        // cluster's pod interface leads nowhere (test/env/kube-cluster.sh, write_cni_config), which
        // isolates a pod at least as well as its deny-all policy. Without the declaration the
        // runner refuses every runc pod (it has eth0): operator-network.test.ts shows that.
        networkPolicyEnforced: true,
        ...c.operator,
      },
    },
    ...(c.auth ? { auth: c.auth } : {}),
    logging: { level: 'debug' },
  };
}

export interface LogLine {
  msg?: string;
  [key: string]: unknown;
}

/** One `sandpit operator` process. */
export class OperatorProcess {
  readonly identity: string;
  readonly logFile: string;
  readonly lines: LogLine[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;
  private readonly dir: string;
  private waiters: (() => void)[] = [];

  private constructor(child: ChildProcess, identity: string, dir: string) {
    this.child = child;
    this.identity = identity;
    this.dir = dir;
    this.logFile = path.join(dir, 'operator.log');
    const log = createWriteStream(this.logFile);
    let partial = '';
    const onData = (chunk: Buffer): void => {
      log.write(chunk);
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) {
        try {
          this.lines.push(JSON.parse(line) as LogLine);
        } catch {
          this.lines.push({ msg: line });
        }
      }
      for (const w of this.waiters.splice(0)) w();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  static start(cluster: KubeCluster, config: OperatorConfig): OperatorProcess {
    const identity = config.identity ?? `op-${Math.random().toString(16).slice(2, 8)}`;
    const dir = mkdtempSync(path.join(tmpdir(), `sandpit-${identity}-`));
    const configFile = path.join(dir, 'config.yaml');
    writeFileSync(configFile, stringify(operatorConfig(config)));
    ensureBuilt();
    const args = [
      BUILT_CLI,
      'operator',
      '--config',
      configFile,
      '--kubeconfig',
      cluster.env.identities.operator.kubeconfigPath,
      '--identity',
      identity,
    ];
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('SANDPIT_') && k !== 'KUBECONFIG'),
    );
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    return new OperatorProcess(child, identity, dir);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  find(pred: (l: LogLine) => boolean): LogLine | undefined {
    return this.lines.find(pred);
  }

  /** Waits for a log line matching `pred` (lines already logged count). */
  async waitForLog(pred: (l: LogLine) => boolean, timeoutMs: number, what: string): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.lines.find(pred);
      if (hit) return hit;
      if (!this.running)
        throw new Error(`operator ${this.identity} exited while waiting for ${what}; log: ${this.logFile}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for operator log: ${what}; log: ${this.logFile}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 500));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** The probe server's URL (loopback), from the start-up log line. */
  async probesUrl(): Promise<string> {
    const line = await this.waitForLog((l) => l.msg === 'Started operator', 20_000, 'Started operator');
    return String(line.probes);
  }

  async metrics(): Promise<string> {
    const res = await fetch(`${await this.probesUrl()}/metrics`);
    return res.text();
  }

  /** Sends a signal to this child (by its PID) and waits for it to exit. */
  async kill(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 20_000): Promise<number | null> {
    if (this.running) this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  /** Stops the process and removes its temp dir unless asked to keep it. */
  async stop(keepLogs = false): Promise<void> {
    await this.kill('SIGTERM');
    if (!keepLogs) rmSync(this.dir, { recursive: true, force: true });
  }
}
