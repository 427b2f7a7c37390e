/**
 * A run's output as the gateway shows it while it follows the pod log: captured head and tail,
 * each kept byte streamed once. A warm run's log (a pool pod's runner) ends with the runner's exit
 * trailer, which is removed here (TrailerFilter without a key: the gateway never holds it), so a
 * warm run's output is byte for byte a cold run's. A cold run's log is passed as it is.
 *
 * A terminal status whose tail is the whole output exactly (exactStatusOutput) may end the output
 * before the log does: a warm run's operator has the result from the attach stream at once, while
 * the log ends only with the container. It is taken only when what was streamed so far is its
 * start, so the streamed chunks, joined, are always the final output. Pure.
 */
import type { CapturedStream } from '../../api/result.js';
import { StreamCapture, type OutputChunk } from '../../runner/capture.js';
import { TrailerFilter } from '../../runner/exit-trailer.js';
import { FilesBlockFilter } from '../../runner/files-block.js';
import type { OutputWindow } from '../../runner/protocol.js';

/**
 * Streamed bytes kept to compare with a status's tail. A tail longer than this is not taken (the
 * log is read to its end instead); the operator's tail is far shorter.
 */
export const MAX_COMPARED_BYTES = 256 * 1024;

export class LogOutput {
  private readonly capture: StreamCapture;
  private readonly onChunk: (chunk: OutputChunk) => void;
  private filter: TrailerFilter | undefined;
  /** A run that asked for output files: its log ends with them (runner/files-block.ts), which are not output. */
  private files: FilesBlockFilter | undefined;
  /** The first streamed bytes, up to MAX_COMPARED_BYTES. */
  private readonly streamed: Buffer[] = [];
  private streamedBytes = 0;
  private closed = false;

  constructor(window: OutputWindow, onChunk: (chunk: OutputChunk) => void) {
    this.capture = new StreamCapture(window);
    this.onChunk = onChunk;
  }

  /** The log to come is a warm run's: its trailer is removed. Call before its first byte. */
  expectTrailer(): void {
    this.filter ??= new TrailerFilter();
  }

  /** The log to come ends with the run's output files: they are not shown. Call before its first byte. */
  expectFiles(): void {
    this.files ??= new FilesBlockFilter(0);
  }

  /** Bytes of the pod log, in order. */
  addLog(data: Buffer): void {
    if (this.closed) return;
    this.showLog(this.filter ? this.filter.push(data) : data);
  }

  /** The log has ended (or will be read no further): what was held back as a possible trailer, when it is none, is output. */
  endLog(): void {
    if (this.closed) return;
    if (this.filter) this.showLog(this.filter.end().rest);
    this.filter = undefined;
    if (this.files) this.show(this.files.end());
    this.files = undefined;
  }

  private showLog(data: Buffer): void {
    this.show(this.files ? this.files.push(data) : data);
  }

  /**
   * Ends the output with `exact` (the whole output, from the status) when what was streamed so far
   * is its start: the rest is streamed, the log is no longer read. False (nothing changed) when it
   * is not, and the log must be read to its end.
   */
  finishWith(exact: Buffer): boolean {
    if (this.closed || this.streamedBytes > exact.length || this.streamedBytes > MAX_COMPARED_BYTES)
      return false;
    if (!Buffer.concat(this.streamed).equals(exact.subarray(0, this.streamedBytes))) return false;
    this.show(exact.subarray(this.streamedBytes));
    this.closed = true;
    return true;
  }

  /** Output bytes delivered so far (the log's, without its trailer). */
  get bytes(): number {
    return this.streamedBytes;
  }

  /** `total` is the runner's count of everything the program wrote, when known. */
  finish(total?: number): CapturedStream {
    this.endLog();
    this.closed = true;
    return this.capture.finish(total);
  }

  private show(data: Buffer): void {
    if (data.length === 0) return;
    if (this.streamedBytes + data.length <= MAX_COMPARED_BYTES) this.streamed.push(Buffer.from(data));
    this.streamedBytes += data.length;
    const kept = this.capture.add(data);
    if (kept.length > 0) this.onChunk({ stream: 'stdout', data: kept });
  }
}
