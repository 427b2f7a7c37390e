/**
 * Turns the runner's frames into live chunks and a final outcome. One reader lives as long as the
 * container's attach stream; `begin()` starts the (single) job's capture.
 */
import type { CapturedStream, OutputChunk, StreamName } from '../output.js';
import { StreamCapture } from '../output.js';
import type { ExitReport, OutputWindow } from './protocol.js';
import { FrameDecoder } from './protocol.js';

export interface RunnerOutcome {
  exit: ExitReport | undefined;
  failure: string | undefined;
  stdout: CapturedStream;
  stderr: CapturedStream;
}

const NO_OUTPUT: OutputWindow = { headBytes: 0, tailBytes: 0 };

export class RunnerReader {
  private readonly decoder = new FrameDecoder();
  private capture: Record<StreamName, StreamCapture> = {
    stdout: new StreamCapture(NO_OUTPUT),
    stderr: new StreamCapture(NO_OUTPUT),
  };
  private onChunk: (chunk: OutputChunk) => void = () => {};
  private exit: ExitReport | undefined;
  private failure: string | undefined;
  private readyResolve!: () => void;
  private doneResolve!: () => void;
  /** Resolves when the runner says it waits for a job. */
  readonly ready = new Promise<void>((r) => (this.readyResolve = r));
  /** Resolves on the exit frame, a failure frame or a malformed stream. */
  readonly done = new Promise<void>((r) => (this.doneResolve = r));

  get finished(): boolean {
    return this.exit !== undefined || this.failure !== undefined;
  }

  begin(window: OutputWindow, onChunk: (chunk: OutputChunk) => void): void {
    this.capture = { stdout: new StreamCapture(window), stderr: new StreamCapture(window) };
    this.onChunk = onChunk;
  }

  /** Feeds bytes from the runner's stdout. */
  push(data: Buffer): void {
    if (this.finished) return;
    let frames;
    try {
      frames = this.decoder.push(data);
    } catch (e) {
      this.fail(`malformed runner output: ${(e as Error).message}`);
      return;
    }
    for (const frame of frames) {
      switch (frame.type) {
        case 'ready':
          this.readyResolve();
          break;
        case 'stdout':
        case 'stderr': {
          const shown = this.capture[frame.type].add(frame.data);
          if (shown.length > 0) this.onChunk({ stream: frame.type, data: shown });
          break;
        }
        case 'tail':
          this.capture[frame.stream].setTail(frame.data);
          break;
        case 'exit':
          this.exit = frame.report;
          this.doneResolve();
          return;
        case 'failure':
          this.fail(frame.message);
          return;
      }
    }
  }

  fail(message: string): void {
    if (this.finished) return;
    this.failure = message;
    this.doneResolve();
  }

  outcome(): RunnerOutcome {
    return {
      exit: this.exit,
      failure: this.failure,
      stdout: this.capture.stdout.finish(this.exit?.stdoutBytes),
      stderr: this.capture.stderr.finish(this.exit?.stderrBytes),
    };
  }
}
