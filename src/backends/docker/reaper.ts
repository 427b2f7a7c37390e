/** Removes sandpit containers whose owner died or whose expiry passed (a crashed caller's leftovers). */
import type Docker from 'dockerode';
import { LABELS, OWNED_FILTERS } from './labels.js';
import { ownerAlive } from './owner.js';

export async function reapLeftovers(docker: Docker, now: number = Date.now()): Promise<string[]> {
  const containers = await docker.listContainers({ all: true, filters: { label: OWNED_FILTERS } });
  const doomed = containers.filter((c) => {
    const owner = c.Labels[LABELS.owner];
    const expires = Number(c.Labels[LABELS.expires] ?? Infinity);
    return expires < now || (owner !== undefined && !ownerAlive(owner));
  });
  await Promise.all(
    doomed.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => {}),
    ),
  );
  return doomed.map((c) => c.Names[0]?.replace(/^\//, '') ?? c.Id);
}
