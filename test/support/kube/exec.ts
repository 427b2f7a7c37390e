// `exec` into a pod through @kubernetes/client-node, with the v1.20 constraints handled:
//  - the v4.channel.k8s.io protocol cannot half-close stdin, and client-node closes the whole
//    socket when the stdin stream ends, so stdin is never ended here: the command must read a
//    known number of bytes (length framing, see `framed()`), not read to EOF;
//  - closing the socket does not kill the process: deadlines belong inside the pod too
//    (`timeout -s KILL`), the client-side timeout here only stops waiting.
import { PassThrough, Writable } from 'node:stream';
import { Exec, type KubeConfig, type V1Status } from '@kubernetes/client-node';

export interface ExecOptions {
  container?: string;
  /** bytes to send on stdin; the command must consume exactly this many (see framed()) */
  stdin?: Buffer | string;
  /** stop waiting (and close the socket) after this long; default 30 s */
  timeoutMs?: number;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  status: V1Status;
  durationMs: number;
}

/** The exit code carried by the status frame (channel 3): Success → 0, else the ExitCode cause. */
export function exitCodeOf(status: V1Status): number | undefined {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  return cause?.message !== undefined ? Number(cause.message) : undefined;
}

/**
 * Wrap a shell pipeline so that it reads exactly `length` bytes of stdin: `head -c N | <pipeline>`.
 * The pipeline then sees EOF after the payload even though the socket's stdin stays open.
 */
export function framed(length: number, pipeline: string): string[] {
  if (!Number.isInteger(length) || length < 0) throw new RangeError(`bad length ${length}`);
  return ['sh', '-c', `head -c ${length} | { ${pipeline}; }`];
}

/** The part of the returned WebSocket used here (its types come through isomorphic-ws). */
interface Socket {
  close(): void;
  on(event: 'error' | 'close', listener: (arg?: unknown) => void): unknown;
}

export function execInPod(
  kc: KubeConfig,
  namespace: string,
  pod: string,
  command: readonly string[],
  opts: ExecOptions = {},
): Promise<ExecResult> {
  const started = performance.now();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const sink = (into: Buffer[]): Writable =>
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        into.push(Buffer.from(chunk));
        cb();
      },
    });
  const stdin = opts.stdin !== undefined ? new PassThrough() : null;
  const timeoutMs = opts.timeoutMs ?? 30_000;

  return new Promise<ExecResult>((resolve, reject) => {
    let socket: Socket | undefined;
    let done = false;
    const finish = (settle: () => void): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket?.close();
      settle();
    };
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(
            new Error(`exec ${command.join(' ')} in ${namespace}/${pod}: no status after ${timeoutMs} ms`),
          ),
        ),
      timeoutMs,
    );
    new Exec(kc)
      .exec(
        namespace,
        pod,
        opts.container ?? '',
        [...command],
        sink(out),
        sink(err),
        stdin,
        false,
        (status: V1Status) => {
          const code = exitCodeOf(status);
          finish(() => {
            if (code === undefined) {
              reject(
                new Error(
                  `exec ${command.join(' ')} in ${namespace}/${pod} failed: ${status.message ?? JSON.stringify(status)}`,
                ),
              );
              return;
            }
            resolve({
              exitCode: code,
              stdout: Buffer.concat(out).toString('utf8'),
              stderr: Buffer.concat(err).toString('utf8'),
              status,
              durationMs: performance.now() - started,
            });
          });
        },
      )
      .then((conn) => {
        const ws = conn as unknown as Socket;
        socket = ws;
        if (done) ws.close();
        ws.on('error', (e: unknown) => finish(() => reject(e instanceof Error ? e : new Error(String(e)))));
        ws.on('close', () =>
          finish(() =>
            reject(
              new Error(`exec ${command.join(' ')} in ${namespace}/${pod}: socket closed without a status`),
            ),
          ),
        );
        if (stdin && opts.stdin !== undefined) stdin.write(opts.stdin); // never end(): see the header comment
      })
      .catch((e: unknown) => finish(() => reject(e instanceof Error ? e : new Error(String(e)))));
  });
}
