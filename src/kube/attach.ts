/**
 * attachPod(): a byte channel to a running container's main process through `pods/attach`
 * (client-node's Attach, protocol v4.channel.k8s.io): stdin and stdout (and stderr when asked), no tty. What the process
 * writes to stdout before the attach is not replayed, and v4 cannot half-close stdin (the runner
 * reads length-framed records, so it never waits for end of file). Everything the process writes
 * also reaches the node's container log.
 */
import { PassThrough, Writable } from 'node:stream';
import { Attach, type KubeConfig } from '@kubernetes/client-node';
import { kubeCall } from './errors.js';

/** The v4 channel byte of stdin. */
const STDIN_CHANNEL = Buffer.from([0]);

/** The socket client-node hands back (the `ws` package's WebSocket), as far as this file uses it. */
interface Socket {
  readonly readyState: number;
  send(data: Buffer, cb: (err?: Error) => void): void;
  ping(): void;
  close(): void;
  on(event: 'close', listener: (code: number, reason: Buffer) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

const OPEN = 1;

export interface AttachedPod {
  /** Writes `parts` as one stdin message; resolves once the socket took it. */
  write(parts: readonly Buffer[]): Promise<void>;
  /** Resolves with why, once the channel is closed (by either side). */
  readonly closed: Promise<string>;
  readonly open: boolean;
  close(): void;
}

export interface AttachTarget {
  namespace: string;
  pod: string;
  container: string;
  /**
   * Pings the other side this often while the channel is open, so that an attach held idle for
   * long is not cut by a proxy or load balancer that drops quiet connections.
   */
  keepAliveMs?: number | undefined;
}

export async function attachPod(
  kc: KubeConfig,
  target: AttachTarget,
  onStdout: (data: Buffer) => void,
  onStderr?: (data: Buffer) => void,
): Promise<AttachedPod> {
  const sink = (on: (data: Buffer) => void): Writable =>
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        on(chunk);
        cb();
      },
    });
  const stdout = sink(onStdout);
  const stderr = onStderr ? sink(onStderr) : null;
  // client-node sends what this stream emits; writes go straight to the socket instead (one
  // message per request, with the socket's own completion callback), so it stays empty.
  const stdin = new PassThrough();
  const { namespace, pod, container } = target;
  const ws = (await kubeCall(`attach to Pod ${namespace}/${pod}`, () =>
    new Attach(kc).attach(namespace, pod, container, stdout, stderr, stdin, false),
  )) as unknown as Socket;
  let why: string | undefined;
  let closedResolve!: (why: string) => void;
  const closed = new Promise<string>((r) => (closedResolve = r));
  const pings = target.keepAliveMs ? setInterval(() => ws.ping(), target.keepAliveMs) : undefined;
  pings?.unref();
  const end = (message: string): void => {
    if (why !== undefined) return;
    why = message;
    clearInterval(pings);
    closedResolve(message);
  };
  ws.on('error', (e) => end(`the attach to ${namespace}/${pod} failed: ${e.message}`));
  ws.on('close', (code) => end(`the attach to ${namespace}/${pod} closed (${code})`));
  return {
    write: (parts) =>
      new Promise<void>((resolve, reject) => {
        if (why !== undefined || ws.readyState !== OPEN) return reject(new Error(why ?? 'not attached'));
        ws.send(Buffer.concat([STDIN_CHANNEL, ...parts]), (err) => (err ? reject(err) : resolve()));
      }),
    closed,
    get open() {
      return why === undefined;
    },
    close: () => {
      end('detached');
      ws.close();
    },
  };
}
