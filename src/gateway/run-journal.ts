/**
 * The runs a process has under way, remembered on disk, so that a run is audited even when its
 * process dies with it (SIGKILL, the OOM killer, a crash). On the Docker and oci backends a run's
 * sandbox ends with the process that attached it, and the run's record, written when the run
 * ends, would go with both. So each run is remembered before its sandbox starts, with the record
 * it gets if it never ends in its process (Failed, BackendError, no exit code), and forgotten once
 * its own record is written. The next sandpit process on the same state directory records the
 * runs of processes that are gone, each once.
 *
 * One small JSON file per run (`<runId>.json`), written whole and renamed into place. The record
 * is kept without the command preview: no code reaches this directory. A journal that cannot be
 * written costs only that safety net, never a run.
 */
import { renameSync, rmSync } from 'node:fs';
import * as z from 'zod';
import { RunAuditRecordSchema, type RunAuditRecord } from '../api/audit.js';
import type { Logger } from '../observability/logger.js';
import { jsonRecords } from './json-records.js';

export interface JournaledRun {
  runId: string;
  /** Epoch ms when its sandbox was asked for. */
  startedAt: number;
  /** The record it gets if its process dies before it ends. */
  record: RunAuditRecord;
}

export interface RunJournal {
  remember(run: JournaledRun): void;
  forget(runId: string): void;
  /**
   * The runs of processes that are gone, each taken out of the journal as it is handed over: two
   * processes starting at once never both get one.
   */
  takeOrphans(): JournaledRun[];
}

/** Which process a journal writes for, and how it tells a process that is gone. */
export interface JournalOwner {
  /** This process: `host:pid:starttime`, so that a dead one is told from a live one whose PID was reused. */
  owner: string;
  alive: (owner: string) => boolean;
}

export const NO_RUN_JOURNAL: RunJournal = {
  remember: () => undefined,
  forget: () => undefined,
  takeOrphans: () => [],
};

const RUN_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;

const JournaledRunSchema = z.object({
  runId: z.string().regex(RUN_ID),
  owner: z.string(),
  startedAt: z.number(),
  record: RunAuditRecordSchema,
});

/** What a run whose process died gets: its journaled record, stamped when it was found. */
export function lostRunRecord(run: JournaledRun, foundAt: number): RunAuditRecord {
  return {
    ...run.record,
    time: new Date(foundAt).toISOString(),
    // The longest it can have run: it ended with its process, at the latest when it was found.
    durationMs: Math.max(0, foundAt - run.startedAt),
  };
}

export function fileRunJournal(dir: string, logger: Logger, { owner, alive }: JournalOwner): RunJournal {
  const records = jsonRecords(dir);
  const warn = (e: unknown, what: string) =>
    logger.warn({ dir, err: e instanceof Error ? e.message : String(e) }, what);
  return {
    remember(run) {
      if (!RUN_ID.test(run.runId)) return;
      try {
        const { preview: _code, ...command } = run.record.command;
        records.write(run.runId, { ...run, owner, record: { ...run.record, command } });
      } catch (e) {
        warn(e, 'the run journal could not be written: a run lost with this process would go unaudited');
      }
    },
    // Off the event loop: a run is forgotten as its result goes out, and a synchronous unlink
    // held the loop for 1 to 2 ms there.
    forget(runId) {
      if (!RUN_ID.test(runId)) return;
      records
        .removeLater(runId)
        .catch((e: unknown) => warn(e, 'a run could not be removed from the run journal'));
    },
    takeOrphans() {
      return records.names().flatMap((name) => {
        let run: JournaledRun & { owner: string };
        try {
          run = records.read(name, JournaledRunSchema);
        } catch (e) {
          warn(e, `the run journal's ${name} is unreadable: skipped`);
          return [];
        }
        if (alive(run.owner)) return [];
        // Taken by a rename: of two processes that both found it, one gets it.
        const taken = `${records.path(name)}.taken-${process.pid}`;
        try {
          renameSync(records.path(name), taken);
          rmSync(taken, { force: true });
        } catch {
          return [];
        }
        return [{ runId: run.runId, startedAt: run.startedAt, record: run.record }];
      });
    },
  };
}
