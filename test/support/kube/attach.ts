// `attach` to a running container's stdin and stdout through @kubernetes/client-node: the path warm
// pods use (a pre-started container whose main process waits on its attached stdin for one job).
// As with exec, v4.channel.k8s.io cannot half-close stdin: the process must read a known amount
// (e.g. one line), not to EOF. Output written before the attach is not replayed.
import { EventEmitter } from 'node:events';
import { PassThrough, Writable } from 'node:stream';
import { Attach, type KubeConfig } from '@kubernetes/client-node';

export interface Attached {
  /** Sends bytes to the container's stdin. */
  write(data: string | Buffer): void;
  /** Resolves with everything read so far once it matches `pattern`; rejects after `timeoutMs`. */
  readUntil(pattern: RegExp, timeoutMs?: number): Promise<string>;
  close(): void;
}

interface Socket {
  close(): void;
  on(event: 'error' | 'close', listener: (arg?: unknown) => void): unknown;
}

export async function attachToPod(
  kc: KubeConfig,
  namespace: string,
  pod: string,
  container: string,
): Promise<Attached> {
  let text = '';
  let ended: Error | undefined;
  const changed = new EventEmitter();
  const stdout = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString('utf8');
      changed.emit('change');
      cb();
    },
  });
  const stdin = new PassThrough();
  const ws = (await new Attach(kc).attach(
    namespace,
    pod,
    container,
    stdout,
    stdout,
    stdin,
    false,
  )) as unknown as Socket;
  const end = (e: Error): void => {
    ended ??= e;
    changed.emit('change');
  };
  ws.on('error', (e) => end(e instanceof Error ? e : new Error(String(e))));
  ws.on('close', () => end(new Error(`attach to ${namespace}/${pod}: the socket closed`)));
  return {
    write: (data) => stdin.write(data), // never end(): see the header comment
    readUntil: (pattern, timeoutMs = 30_000) =>
      new Promise<string>((resolve, reject) => {
        const check = (): void => {
          if (pattern.test(text)) return done(() => resolve(text));
          if (ended) done(() => reject(new Error(`${ended?.message}; read so far: ${JSON.stringify(text)}`)));
        };
        const done = (settle: () => void): void => {
          clearTimeout(timer);
          changed.off('change', check);
          settle();
        };
        const timer = setTimeout(
          () =>
            done(() =>
              reject(new Error(`no ${pattern} after ${timeoutMs} ms; read: ${JSON.stringify(text)}`)),
            ),
          timeoutMs,
        );
        changed.on('change', check);
        check();
      }),
    close: () => ws.close(),
  };
}
