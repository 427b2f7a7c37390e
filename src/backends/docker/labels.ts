/** Labels on every container sandpit creates: ownership, for clean-up and for the reaper. */
export const LABELS = {
  managedBy: 'sandpit.dev/managed-by',
  run: 'sandpit.dev/run',
  template: 'sandpit.dev/template',
  kind: 'sandpit.dev/kind',
  /** `host:pid:starttime` of the process that owns the container. */
  owner: 'sandpit.dev/owner',
  /** Epoch ms after which the container is garbage whoever owns it. */
  expires: 'sandpit.dev/expires-at',
  /** `session` on containers whose runner serves a session (absent: a one-shot run). */
  mode: 'sandpit.dev/mode',
  session: 'sandpit.dev/session',
  /**
   * The key a session runner's records start with, hex: set at creation and handed to the runner
   * in the open request, before any exec runs, so that a gateway adopting the session never sends
   * it again where an exec might read it (under gVisor an exec can open the runner's stdin).
   * Only the engine's users see labels, and they own the container anyway.
   */
  channelKey: 'sandpit.dev/channel-key',
  /** Who owns the session (a principal's name, never a token). */
  principal: 'sandpit.dev/principal',
  /** The gateway instance (`server.instanceId`) that adopts the session after a restart; absent: none does. */
  instance: 'sandpit.dev/instance',
  /** An egress sandbox's gate directory on the host: where an adopting gateway listens for it again. */
  egressDir: 'sandpit.dev/egress-dir',
} as const;

export const MANAGED_BY = 'sandpit';
export const MANAGED_FILTER = `${LABELS.managedBy}=${MANAGED_BY}`;
/**
 * The containers sandpit made: a container inherits its image's labels, and the sandpit images
 * carry managed-by too, so ownership also needs `kind`, which only sandpit sets, at creation.
 */
export const OWNED_FILTERS = [MANAGED_FILTER, LABELS.kind];
