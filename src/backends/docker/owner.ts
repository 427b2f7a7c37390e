/**
 * Who owns a container: `host:pid:starttime`. The start time tells a live owner from a dead one
 * whose PID was reused, so the reaper never removes the containers of a process that still runs.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime) counts from after the command name, which may itself hold spaces.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

export function currentOwner(): string {
  return `${hostname()}:${process.pid}:${processStartTime(process.pid) ?? '0'}`;
}

/** False only when the owner is on this host and certainly gone. */
export function ownerAlive(owner: string): boolean {
  const [host, pid, start] = owner.split(':');
  if (host !== hostname() || !pid) return true;
  return processStartTime(Number(pid)) === start;
}
