/** Readable text for results: what a model reads when it ignores structured content. */
import type { RunOutputs } from '../../api/outputs.js';
import type { RunResult } from '../../api/run.js';
import type { ExecResult, Session } from '../../api/session.js';

export function renderRun(r: RunResult | ExecResult): string {
  const head = [
    r.phase,
    r.exitCode !== null ? `exit code ${r.exitCode}` : undefined,
    `${Math.round(r.durationMs)} ms`,
    'runId' in r ? r.runId : r.execId,
    r.template ?? r.image,
  ].filter(Boolean);
  const lines = [head.join(' · ')];
  if (r.message && r.phase !== 'Succeeded') lines.push(r.message);
  if (r.hint) lines.push(`hint: ${r.hint}`);
  lines.push(section('stdout', r.stdout, r.stdoutBytes), section('stderr', r.stderr, r.stderrBytes));
  if (r.truncated) lines.push('(output was truncated: head and tail kept, byte counts are exact)');
  if ('outputs' in r && r.outputs) lines.push(...renderOutputs(r.outputs));
  return lines.filter((l) => l !== '').join('\n');
}

/** The files a run returned, and what it did not return and why. */
function renderOutputs(o: RunOutputs): string[] {
  const lines = [`--- files (${o.files.length}, ${o.bytes} bytes) ---`];
  for (const f of o.files) {
    const how = f.delivery === 'image' ? 'image, shown' : 'resource link';
    lines.push(`${f.path} (${f.bytes} bytes, ${f.mimeType}; ${how})${f.note ? `: ${f.note}` : ''}`);
  }
  if (o.skipped.length > 0) lines.push('--- not returned ---');
  for (const s of o.skipped) lines.push(`${s.entry}: ${s.reason}: ${s.message}`);
  return lines;
}

function section(name: string, text: string, bytes: number): string {
  if (bytes === 0 && text === '') return '';
  return `--- ${name} (${bytes} bytes) ---\n${text.endsWith('\n') ? text.slice(0, -1) : text}`;
}

export function renderSession(s: Session): string {
  const head = [s.id, s.state, s.reason, s.template ?? s.image].filter(Boolean).join(' · ');
  const lines = [head];
  if (s.message && s.state !== 'Ready') lines.push(s.message);
  if (s.state === 'Ready') lines.push(`expires ${s.expiresAt}; idle until ${s.idleExpiresAt}`);
  return lines.join('\n');
}
