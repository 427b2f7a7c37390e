/**
 * One audit record per execution, the same shape from the gateway and the controller: who ran
 * what (by digest, never the code itself), with which limits, and how it ended.
 */
import { createHash } from 'node:crypto';
import type { RunResult } from '../api/run.js';
import type { EffectiveSpec } from '../policy/evaluate.js';
import type { Logger } from './logger.js';

export interface AuditRecord {
  audit: 'run';
  runId: string;
  principal: string;
  backend: string;
  template: string | undefined;
  image: string;
  runtime: string | undefined;
  commandDigest: string;
  codeBytes: number;
  fileCount: number;
  limits: EffectiveSpec['limits'];
  network: string;
  phase: string;
  reason: string | undefined;
  exitCode: number | null;
  durationMs: number;
  stdoutBytes: number;
  stderrBytes: number;
}

/** The few facts of how a run ended that its audit record carries (a RunResult has them all). */
export type AuditOutcome = Pick<
  RunResult,
  'runId' | 'phase' | 'reason' | 'exitCode' | 'durationMs' | 'stdoutBytes' | 'stderrBytes'
>;

/** sha256 over argv, code, files and stdin: identifies what ran without revealing it. */
export function commandDigest(spec: EffectiveSpec): string {
  const h = createHash('sha256');
  for (const a of spec.argv) h.update(a).update('\0');
  h.update('code\0').update(spec.code?.content ?? Buffer.alloc(0));
  for (const f of spec.files) h.update(`\0file\0${f.path}\0`).update(f.content);
  h.update('\0stdin\0').update(spec.stdin);
  return `sha256:${h.digest('hex')}`;
}

export function auditRecord(
  spec: EffectiveSpec,
  result: AuditOutcome,
  principal: string,
  backend: string,
): AuditRecord {
  return {
    audit: 'run',
    runId: result.runId,
    principal,
    backend,
    template: spec.template,
    image: spec.image,
    runtime: spec.runtime,
    commandDigest: commandDigest(spec),
    codeBytes: spec.code?.content.length ?? 0,
    fileCount: spec.files.length,
    limits: spec.limits,
    network: spec.network,
    phase: result.phase,
    reason: result.reason,
    exitCode: result.exitCode,
    durationMs: result.durationMs,
    stdoutBytes: result.stdoutBytes,
    stderrBytes: result.stderrBytes,
  };
}

export function writeAudit(logger: Logger, record: AuditRecord): void {
  logger.info(record, 'audit');
}
