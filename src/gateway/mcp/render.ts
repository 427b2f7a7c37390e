/** Readable text for results: what a model reads when it ignores structured content. */
import type { RunResult } from '../../api/run.js';

export function renderRun(r: RunResult): string {
  const head = [
    r.phase,
    r.exitCode !== null ? `exit code ${r.exitCode}` : undefined,
    `${Math.round(r.durationMs)} ms`,
    r.runId,
    r.template ?? r.image,
  ].filter(Boolean);
  const lines = [head.join(' · ')];
  if (r.message && r.phase !== 'Succeeded') lines.push(r.message);
  if (r.hint) lines.push(`hint: ${r.hint}`);
  lines.push(section('stdout', r.stdout, r.stdoutBytes), section('stderr', r.stderr, r.stderrBytes));
  if (r.truncated) lines.push('(output was truncated: head and tail kept, byte counts are exact)');
  return lines.filter((l) => l !== '').join('\n');
}

function section(name: string, text: string, bytes: number): string {
  if (bytes === 0 && text === '') return '';
  return `--- ${name} (${bytes} bytes) ---\n${text.endsWith('\n') ? text.slice(0, -1) : text}`;
}
