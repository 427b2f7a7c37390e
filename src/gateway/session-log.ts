/**
 * A session's exec history (`GET /sessions/:id/logs`): the finished execs with their outputs,
 * newest last, bounded by count and by output bytes. The oldest go first; the newest always stays,
 * even alone over the byte budget, so the last command's result can be read back.
 */
import type { ExecLogEntry } from '../api/session.js';

export type { ExecLogEntry };

export interface ExecLogOptions {
  maxExecs: number;
  maxBytes: number;
}

const sizeOf = (e: ExecLogEntry): number =>
  Buffer.byteLength(e.result.stdout) + Buffer.byteLength(e.result.stderr);

export class ExecLog {
  private readonly entries: ExecLogEntry[] = [];
  private bytes = 0;
  private readonly options: ExecLogOptions;

  constructor(options: ExecLogOptions) {
    this.options = options;
  }

  add(entry: ExecLogEntry): void {
    this.entries.push(entry);
    this.bytes += sizeOf(entry);
    while (
      this.entries.length > 1 &&
      (this.entries.length > this.options.maxExecs || this.bytes > this.options.maxBytes)
    ) {
      const dropped = this.entries.shift();
      if (dropped) this.bytes -= sizeOf(dropped);
    }
  }

  get(execId: string): ExecLogEntry | undefined {
    return this.entries.find((e) => e.execId === execId);
  }

  list(): readonly ExecLogEntry[] {
    return this.entries;
  }
}
