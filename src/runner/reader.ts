/**
 * Turns the runner's frames into live chunks and a final outcome. One reader lives as long as the
 * container's attach stream; `begin()` starts the (single) job's capture.
 */
import type { OutputCaps } from '../api/outputs.js';
import type { CapturedStream } from '../api/result.js';
import { AppError } from '../shared/errors.js';
import { StreamCapture, type OutputChunk, type StreamName } from './capture.js';
import { OutputFilesReader, type ReturnedOutputs } from './output-files.js';
import {
  FrameDecoder,
  MIN_PROTOCOL_VERSION,
  type ExitReport,
  type Frame,
  type OutputWindow,
} from './protocol.js';

export interface RunnerOutcome {
  exit: ExitReport | undefined;
  failure: string | undefined;
  stdout: CapturedStream;
  stderr: CapturedStream;
  /** Bytes on the runner's channel that were not its frames: something else wrote into it. */
  skippedBytes: number;
  /** The output files it returned, when the job asked for any. */
  outputs: ReturnedOutputs | undefined;
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
  private files: OutputFilesReader | undefined;
  private readyResolve!: (version: number) => void;
  private doneResolve!: () => void;
  /** Resolves with the runner's protocol version when it says it waits for a job. */
  readonly ready = new Promise<number>((r) => (this.readyResolve = r));
  /** Resolves on the exit frame, a failure frame or a malformed stream. */
  readonly done = new Promise<void>((r) => (this.doneResolve = r));

  get finished(): boolean {
    return this.exit !== undefined || this.failure !== undefined;
  }

  /**
   * Starts the job's capture: from now on only frames that start with `key` are the runner's.
   * `files`: the caps of the output files the job asks for (none: it asks for none).
   */
  begin(
    window: OutputWindow,
    key: Buffer,
    onChunk: (chunk: OutputChunk) => void,
    files?: Pick<OutputCaps, 'maxFiles' | 'maxBytes'>,
  ): void {
    this.capture = { stdout: new StreamCapture(window), stderr: new StreamCapture(window) };
    this.onChunk = onChunk;
    this.files = files ? new OutputFilesReader(files) : undefined;
    this.decoder.expectKey(key);
  }

  /** Feeds bytes from the runner's stdout. */
  push(data: Buffer): void {
    if (this.finished) return;
    try {
      for (const frame of this.decoder.push(data)) {
        this.take(frame);
        if (this.finished) return;
      }
    } catch (e) {
      this.fail(`malformed runner output: ${(e as Error).message}`);
    }
  }

  private take(frame: Frame): void {
    switch (frame.type) {
      case 'ready':
        this.readyResolve(frame.version);
        break;
      case 'stdout':
      case 'stderr': {
        const shown = this.capture[frame.type].add(frame.data);
        if (shown.length > 0) this.onChunk({ stream: frame.type, data: shown });
        break;
      }
      case 'tail':
        this.capture[frame.stream].addTail(frame.data);
        break;
      case 'exit':
        this.exit = frame.report;
        this.doneResolve();
        return;
      case 'failure':
        this.fail(frame.message);
        return;
      case 'file':
        this.outputFiles().start(frame.path, frame.size);
        break;
      case 'file-data':
        this.outputFiles().data(frame.data);
        break;
      case 'skip':
        this.outputFiles().skip(frame.reason, frame.entry, frame.message);
        break;
    }
  }

  private outputFiles(): OutputFilesReader {
    if (!this.files) throw new Error('output files the job did not ask for');
    return this.files;
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
      skippedBytes: this.decoder.skippedBytes,
      outputs: this.files?.finish(),
    };
  }
}

/**
 * Refuses a runner older than this code speaks (its image predates the protocol), or older than
 * what a job needs (`needed`, e.g. egress) with `what` saying which feature.
 */
export function checkRunnerVersion(
  version: number,
  image: string,
  need: { version: number; what: string } = { version: MIN_PROTOCOL_VERSION, what: 'this sandpit' },
): void {
  if (version >= need.version) return;
  throw new AppError(
    'IMAGE_OUTDATED',
    `the runner in image ${image} speaks protocol ${version}; ${need.what} needs ${need.version} or later`,
    { hint: 'rebuild the sandbox images: `sandpit images build`' },
  );
}
