/**
 * Streams a run's output to the client while it executes: each piece as a logging notification
 * (logger `stdout` / `stderr`) and, when the client sent a progressToken, as a progress
 * notification. A first `sandpit` log message carries the run id, so a client can cancel or look
 * the run up before the result arrives. Log notifications are at level info: a client that set a
 * higher level (logging/setLevel) gets only the progress notifications.
 *
 * Chunks that arrive within a few milliseconds of each other (`print` writes text and newline
 * separately) go out as one notification, in their order; the end of the output flushes at once,
 * so coalescing never delays the result.
 */
import { StringDecoder } from 'node:string_decoder';
import type { ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { StreamName } from '../../backends/output.js';
import type { RunHandle } from '../service.js';
import type { ToolExtra } from './context.js';

export const COALESCE_MS = 5;

export async function relayOutput(
  handle: RunHandle,
  extra: ToolExtra,
  options: { log: boolean },
): Promise<void> {
  const token = extra._meta?.progressToken;
  let progress = 0;
  // A client that went away must not fail the run: its result is still recorded for get_run.
  const send = (n: ServerNotification): Promise<void> => extra.sendNotification(n).catch(() => undefined);
  const emit = async (stream: StreamName | 'sandpit', data: unknown, message: string): Promise<void> => {
    if (options.log)
      await send({ method: 'notifications/message', params: { level: 'info', logger: stream, data } });
    if (token !== undefined) {
      await send({
        method: 'notifications/progress',
        params: { progressToken: token, progress: progress++, message },
      });
    }
  };

  let pending: { stream: StreamName; text: string }[] = [];
  let timer: NodeJS.Timeout | undefined;
  let sent = Promise.resolve();
  const flush = (): void => {
    clearTimeout(timer);
    timer = undefined;
    const batch = pending;
    pending = [];
    sent = sent.then(async () => {
      for (const { stream, text } of batch) await emit(stream, text, text);
    });
  };
  const add = (stream: StreamName, text: string): void => {
    if (text === '') return;
    const last = pending[pending.length - 1];
    if (last?.stream === stream) last.text += text;
    else pending.push({ stream, text });
    timer ??= setTimeout(flush, COALESCE_MS);
  };

  await emit('sandpit', { event: 'run_started', runId: handle.runId }, `run ${handle.runId} started`);
  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  for await (const chunk of handle.output) add(chunk.stream, decoders[chunk.stream].write(chunk.data));
  add('stdout', decoders.stdout.end());
  add('stderr', decoders.stderr.end());
  flush();
  await sent;
}
