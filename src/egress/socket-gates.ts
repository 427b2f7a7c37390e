/**
 * The egress proxy's doors on Docker: one Unix socket per sandbox, `<root>/<id>/proxy.sock`, made
 * when the sandbox is created and mounted into it read-only (a directory, so that a gateway
 * started again can listen there anew for a session it adopts). This design needs no bridge
 * network: the sandbox keeps only lo, and a socket on the host is the one thing it can reach.
 *
 * A connection belongs to whatever run or session holds the gate now: a warm pool sandbox's gate
 * refuses every request until a run claims the sandbox (and stays refusing if that run has no
 * egress), so egress runs keep the warm path.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { chmod, mkdir, readdir, rm } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import type { EgressProxy, TenantLookup } from './proxy.js';
import type { EgressTenant } from './tenant.js';

export const SOCKET_NAME = 'proxy.sock';
const ID = /^[0-9a-f]{16}$/;

export interface EgressGate {
  /** The directory to mount into the sandbox (it holds SOCKET_NAME). */
  readonly dir: string;
  /** The run or session whose connections come in here from now on. */
  bind(tenant: EgressTenant): void;
  readonly tenant: EgressTenant | undefined;
  /** Stops listening and removes the directory; idempotent. */
  close(): Promise<void>;
  /** Stops listening and leaves the directory, for a gateway that adopts the sandbox (reopen). */
  release(): void;
}

export interface SocketGates {
  readonly root: string;
  /** A new gate, refusing until bound. */
  open(): Promise<EgressGate>;
  /** The gate of a sandbox made earlier (an adopted session's), listening at its directory again. */
  reopen(dir: string): Promise<EgressGate>;
  /**
   * Removes the directories under the root that no sandbox mounts (`inUse`) and nobody listens in:
   * what sandboxes removed by a crashed gateway's reaper left. Returns them.
   */
  sweep(inUse: ReadonlySet<string>): Promise<string[]>;
  /** Closes every gate this process holds, then the proxy behind them (its tunnels end). */
  close(): Promise<void>;
}

const UNCLAIMED: TenantLookup = {
  refused: { status: 403, reason: 'no-egress', rule: 'this sandbox has no egress (egress: none)' },
};

export function createSocketGates(options: { root: string; proxy: EgressProxy }): SocketGates {
  const root = resolve(options.root);
  const open = new Set<EgressGate>();

  async function listen(dir: string): Promise<EgressGate> {
    // The root stays private to this user; the sandbox sees only its own directory, mounted.
    await mkdir(root, { recursive: true, mode: 0o700 });
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await chmod(dir, 0o755);
    const path = join(dir, SOCKET_NAME);
    await rm(path, { force: true });
    let tenant: EgressTenant | undefined;
    // Half-open allowed: a program that shuts its side after a request still reads the answer.
    const server: Server = createServer({ allowHalfOpen: true }, (socket) =>
      options.proxy.accept(socket, () => (tenant ? { tenant } : UNCLAIMED)),
    );
    server.listen(path);
    await once(server, 'listening');
    // The sandbox's user (uid 1000) connects: a socket needs write permission for that.
    await chmod(path, 0o666);
    let closing: Promise<void> | undefined;
    const gate: EgressGate = {
      dir,
      bind: (t) => void (tenant = t),
      get tenant() {
        return tenant;
      },
      close: () =>
        (closing ??= (async () => {
          open.delete(gate);
          server.close();
          await rm(dir, { recursive: true, force: true });
        })()),
      release() {
        open.delete(gate);
        server.close();
      },
    };
    open.add(gate);
    return gate;
  }

  return {
    root,
    open: () => listen(join(root, randomBytes(8).toString('hex'))),
    reopen(dir) {
      const resolved = resolve(dir);
      if (dirname(resolved) !== root || !ID.test(basename(resolved)))
        return Promise.reject(new Error(`${dir} is not an egress gate directory under ${root}`));
      return listen(resolved);
    },
    async sweep(inUse) {
      const names = await readdir(root).catch(() => [] as string[]);
      const stale: string[] = [];
      for (const name of names.filter((n) => ID.test(n))) {
        const dir = join(root, name);
        if (inUse.has(dir) || (await answers(join(dir, SOCKET_NAME)))) continue;
        await rm(dir, { recursive: true, force: true });
        stale.push(dir);
      }
      return stale;
    },
    async close() {
      await Promise.all([...open].map((g) => g.close()));
      options.proxy.close();
    },
  };
}

/** Whether a process listens on the socket (a live gateway's gate). */
function answers(path: string): Promise<boolean> {
  return new Promise((done) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      done(true);
    });
    s.once('error', () => done(false));
  });
}
