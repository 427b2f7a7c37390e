/**
 * Streams a run's output to the client while it executes: each piece as a logging notification
 * (logger `stdout` / `stderr`) and, when the client sent a progressToken, as a progress
 * notification. A first `sandpit` log message carries the run id, so a client can cancel or look
 * the run up before the result arrives. Log notifications are at level info: a client that set a
 * higher level (logging/setLevel) gets only the progress notifications.
 *
 * Chunks that arrive within a few milliseconds of each other (`print` writes text and newline
 * separately) go out as one notification, in their order; the end of the output flushes at once,
 * so coalescing never delays the result. Nothing is sent before the `run_started` message.
 */
import type { ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { LiveChunk } from '../live-output.js';
import type { StreamName } from '../../runner/capture.js';
import type { ToolExtra } from './context.js';

export const COALESCE_MS = 5;

export class OutputRelay {
  private readonly extra: ToolExtra;
  private readonly log: boolean;
  private progress = 0;
  private pending: { stream: StreamName; text: string }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private open!: () => void;
  /** The notifications sent so far, in order; output waits for run_started. */
  private sent = new Promise<void>((resolve) => (this.open = resolve));

  constructor(extra: ToolExtra, options: { log: boolean }) {
    this.extra = extra;
    this.log = options.log;
  }

  /** The first notification: the run's id. */
  started(runId: string): void {
    void this.emit('sandpit', { event: 'run_started', runId }, `run ${runId} started`).then(this.open);
  }

  /** The first notification of a session exec: its ids. */
  execStarted(sessionId: string, execId: string): void {
    void this.emit('sandpit', { event: 'exec_started', sessionId, execId }, `exec ${execId} started`).then(
      this.open,
    );
  }

  add(chunk: LiveChunk): void {
    if (chunk.text === '') return;
    const last = this.pending[this.pending.length - 1];
    if (last?.stream === chunk.stream) last.text += chunk.text;
    else this.pending.push({ stream: chunk.stream, text: chunk.text });
    this.timer ??= setTimeout(() => this.flush(), COALESCE_MS);
  }

  /** Sends what is pending at once; resolves when every notification is out. */
  async end(): Promise<void> {
    this.flush();
    await this.sent;
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    this.sent = this.sent.then(async () => {
      for (const { stream, text } of batch) await this.emit(stream, text, text);
    });
  }

  private async emit(stream: StreamName | 'sandpit', data: unknown, message: string): Promise<void> {
    const token = this.extra._meta?.progressToken;
    if (this.log)
      await this.send({ method: 'notifications/message', params: { level: 'info', logger: stream, data } });
    if (token !== undefined) {
      await this.send({
        method: 'notifications/progress',
        params: { progressToken: token, progress: this.progress++, message },
      });
    }
  }

  /** A client that went away must not fail the run: its result is still recorded for get_run. */
  private send(n: ServerNotification): Promise<void> {
    return this.extra.sendNotification(n).catch(() => undefined);
  }
}
