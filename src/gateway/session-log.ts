/**
 * A session's exec history (`GET /sessions/:id/logs`): the finished execs with their outputs,
 * newest last, bounded by count and by output bytes. The oldest go first; the newest always stays,
 * even alone over the byte budget, so the last command's result can be read back. Execs another
 * gateway ran come in from the runner's own history (merge), each once.
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
    if (this.get(entry.execId)) return;
    this.entries.push(entry);
    this.bytes += sizeOf(entry);
    this.trim();
  }

  /** Execs this log does not have yet (run elsewhere), in order of their end among those it has. */
  merge(entries: readonly ExecLogEntry[]): void {
    const added = entries.filter((e) => !this.get(e.execId));
    if (added.length === 0) return;
    const endOf = (e: ExecLogEntry) => Date.parse(e.result.finishedAt ?? '') || 0;
    this.entries.push(...added);
    this.entries.sort((a, b) => endOf(a) - endOf(b));
    for (const e of added) this.bytes += sizeOf(e);
    this.trim();
  }

  private trim(): void {
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
