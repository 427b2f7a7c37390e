/**
 * Reads the sandbox container's log (pods/log): followed while the program runs, or read once. On
 * Kubernetes before 1.32 the log is one stream, stdout and stderr interleaved. client-node pipes the
 * response into our sink (ending it when the log ends) but does not pass on a broken connection,
 * so the caller bounds how long it waits for the end.
 */
import { Writable } from 'node:stream';
import { toKubeError } from '../../kube/errors.js';
import type { ObjectRef, RunApi } from './run-api.js';

export type LogEnd =
  | { kind: 'ended' }
  | { kind: 'aborted' }
  /** The log could not be opened: `status` is the HTTP status (0 when the server was not reached). */
  | { kind: 'failed'; status: number; message: string };

export interface LogReader {
  /** Resolves once: when the log ended, was aborted, or could not be opened. */
  readonly done: Promise<LogEnd>;
  /** Bytes delivered so far. */
  readonly bytes: number;
  abort(): void;
}

export function readLog(
  api: Pick<RunApi, 'streamLog'>,
  target: { pod: ObjectRef; follow: boolean },
  onChunk: (data: Buffer) => void,
): LogReader {
  let bytes = 0;
  let settled = false;
  let controller: AbortController | undefined;
  let settle!: (end: LogEnd) => void;
  const done = new Promise<LogEnd>((resolve) => {
    settle = (end) => {
      if (settled) return;
      settled = true;
      resolve(end);
    };
  });
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      if (!settled) {
        bytes += chunk.length;
        onChunk(chunk);
      }
      callback();
    },
  });
  sink.on('finish', () => settle({ kind: 'ended' }));
  api.streamLog(target.pod, sink, target.follow).then(
    (c) => {
      controller = c;
      if (settled) c.abort();
    },
    (e: unknown) => {
      const err = toKubeError(e, `read log of Pod ${target.pod.namespace}/${target.pod.name}`);
      settle({ kind: 'failed', status: err.status, message: err.message });
    },
  );
  return {
    done,
    get bytes() {
      return bytes;
    },
    abort() {
      settle({ kind: 'aborted' });
      controller?.abort();
    },
  };
}
