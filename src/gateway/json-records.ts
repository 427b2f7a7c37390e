/**
 * A directory of small JSON records, one file per id (`<id>.json`), each written whole and
 * renamed into place: what the run and session journals keep beside their sandboxes. Errors are
 * thrown; the journals log them, since a journal that cannot be written costs only its safety net.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type * as z from 'zod';

export interface JsonRecords {
  /** Writes `value` as `<id>.json`, whole: readers never see half of it. */
  write(id: string, value: unknown): void;
  remove(id: string): void;
  /** The same, off the event loop (for a path where a synchronous unlink would hold it up). */
  removeLater(id: string): Promise<void>;
  /** Every record's file name (`<id>.json`); none when the directory does not exist. */
  names(): string[];
  /** The record in file `name`, as `schema` parses it; throws when it is unreadable. */
  read<T>(name: string, schema: z.ZodType<T>): T;
  /** The path of file `name`. */
  path(name: string): string;
}

export function jsonRecords(dir: string): JsonRecords {
  const path = (name: string) => join(dir, name);
  return {
    write(id, value) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      const file = path(`${id}.json`);
      writeFileSync(`${file}.tmp`, JSON.stringify(value), { mode: 0o600 });
      renameSync(`${file}.tmp`, file);
    },
    remove(id) {
      rmSync(path(`${id}.json`), { force: true });
    },
    removeLater(id) {
      return rm(path(`${id}.json`), { force: true });
    },
    names() {
      try {
        return readdirSync(dir).filter((n) => n.endsWith('.json'));
      } catch {
        return [];
      }
    },
    read(name, schema) {
      return schema.parse(JSON.parse(readFileSync(path(name), 'utf8')));
    },
    path,
  };
}
