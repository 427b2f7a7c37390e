/**
 * Streams a run's output to the client while it executes: each chunk as a logging notification
 * (logger `stdout` / `stderr`) and, when the client sent a progressToken, as a progress
 * notification. A first `sandpit` log message carries the run id, so a client can cancel or look
 * the run up before the result arrives.
 */
import { StringDecoder } from 'node:string_decoder';
import type { ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { StreamName } from '../../backends/output.js';
import type { RunHandle } from '../service.js';
import type { ToolExtra } from './context.js';

export async function relayOutput(handle: RunHandle, extra: ToolExtra): Promise<void> {
  const token = extra._meta?.progressToken;
  let progress = 0;
  // A client that went away must not fail the run: its result is still recorded for get_run.
  const send = (n: ServerNotification): Promise<void> => extra.sendNotification(n).catch(() => undefined);
  const emit = async (stream: StreamName, text: string): Promise<void> => {
    if (text === '') return;
    await send({ method: 'notifications/message', params: { level: 'info', logger: stream, data: text } });
    if (token !== undefined) {
      await send({
        method: 'notifications/progress',
        params: { progressToken: token, progress: ++progress, message: text },
      });
    }
  };

  await send({
    method: 'notifications/message',
    params: { level: 'info', logger: 'sandpit', data: { event: 'run_started', runId: handle.runId } },
  });
  if (token !== undefined) {
    await send({
      method: 'notifications/progress',
      params: { progressToken: token, progress, message: `run ${handle.runId} started` },
    });
  }
  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  for await (const chunk of handle.output) await emit(chunk.stream, decoders[chunk.stream].write(chunk.data));
  await emit('stdout', decoders.stdout.end());
  await emit('stderr', decoders.stderr.end());
}
