/**
 * What a gateway remembers of its live sessions across a restart, beside their sandboxes: who owns
 * each and what it was made with. A session found gone at adoption (its runner dead, its container
 * removed) is then still audited with its principal, image and limits, and an adopted one keeps
 * its principal's name. The spec is kept without env and secrets: no value reaches the disk.
 *
 * One small JSON file per session in the instance's directory, written whole and renamed into
 * place, removed when the session ends. A journal that cannot be written costs only those audit
 * facts, never a session.
 */
import * as z from 'zod';
import { SESSION_ID_PATTERN } from '../api/session.js';
import type { Logger } from '../observability/logger.js';
import { SessionFactsSchema, type SessionFacts } from '../policy/session.js';
import { jsonRecords } from './json-records.js';

export interface JournaledSession {
  sessionId: string;
  /** The owning principal's id, and its name for audit records. */
  owner: string;
  principalName: string;
  createdAt: number;
  spec: SessionFacts;
}

export interface SessionJournal {
  remember(session: JournaledSession): void;
  forget(sessionId: string): void;
  /** Every session remembered, as written (unreadable files are skipped and logged). */
  entries(): JournaledSession[];
}

export const NO_JOURNAL: SessionJournal = {
  remember: () => undefined,
  forget: () => undefined,
  entries: () => [],
};

const JournaledSessionSchema = z.object({
  sessionId: z.string().regex(SESSION_ID_PATTERN),
  owner: z.string(),
  principalName: z.string(),
  createdAt: z.number(),
  spec: SessionFactsSchema,
});

export function fileJournal(dir: string, logger: Logger): SessionJournal {
  const records = jsonRecords(dir);
  const warn = (e: unknown, what: string) =>
    logger.warn({ dir, err: e instanceof Error ? e.message : String(e) }, what);
  return {
    remember(session) {
      try {
        records.write(session.sessionId, session);
      } catch (e) {
        warn(
          e,
          'the session journal could not be written: a lost session would be audited without its facts',
        );
      }
    },
    forget(sessionId) {
      try {
        records.remove(sessionId);
      } catch (e) {
        warn(e, 'a session could not be removed from the journal');
      }
    },
    entries() {
      return records.names().flatMap((name) => {
        try {
          const j = records.read(name, JournaledSessionSchema);
          const spec = { ...j.spec, template: j.spec.template, runtime: j.spec.runtime };
          return [{ ...j, spec }];
        } catch (e) {
          warn(e, `the session journal's ${name} is unreadable: skipped`);
          return [];
        }
      });
    },
  };
}
