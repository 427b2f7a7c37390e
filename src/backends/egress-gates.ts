/**
 * The egress gates of the backends whose sandboxes reach the proxy through a Unix socket of their
 * own, mounted into them (Docker, oci; ../egress/socket-gates.ts): a new sandbox's gate, and a
 * session's allowlist bound to its sandbox's gate once its runner is ready.
 */
import type { EgressGate, SocketGates } from '../egress/socket-gates.js';
import { createTenant } from '../egress/tenant.js';
import type { EffectiveSessionSpec } from '../policy/session.js';
import type { SandboxShape } from '../policy/shape.js';
import { EGRESS_SOCKET_PATH } from '../runner/protocol.js';
import { EGRESS_SESSION_VERSION } from '../runner/session-protocol.js';
import { AppError } from '../shared/errors.js';
import type { SessionMeta } from './session-meta.js';

/**
 * The gate of a new sandbox of `shape`: one, refusing until bound, when it has an allowlist; none
 * without egress. Refused when this gateway runs no proxy (policy refuses allowlists then anyway).
 */
export async function openGate(
  gates: SocketGates | undefined,
  shape: Pick<SandboxShape, 'network'>,
  what: 'sandbox' | 'session',
): Promise<EgressGate | undefined> {
  if (shape.network.egress !== 'allowlist') return undefined;
  if (!gates)
    throw new AppError(
      'UNSUPPORTED',
      `this gateway runs no egress proxy, so no ${what} may have an allowlist`,
      {
        hint: 'set DISABLE_NETWORK=false (sandbox.disableNetwork: false) and an egress ceiling (sandbox.egress.allow)',
      },
    );
  return gates.open();
}

/** A session's sandbox with a gate: its runner's session protocol, once it said it is ready. */
export interface GatedSession {
  readonly gate: EgressGate | undefined;
  protocol(): Promise<number | undefined>;
}

/**
 * The session's allowlist goes to its sandbox's gate: from now on its connections are the
 * session's. The proxy socket's path inside the sandbox, for the open request.
 */
export async function bindSessionGate(
  sandbox: GatedSession,
  spec: EffectiveSessionSpec,
  meta: Pick<SessionMeta, 'sessionId' | 'principal'>,
): Promise<string> {
  const version = (await sandbox.protocol()) ?? 0;
  if (version < EGRESS_SESSION_VERSION)
    throw new AppError(
      'IMAGE_OUTDATED',
      `the runner in image ${spec.image} speaks session protocol ${version}; egress needs ${EGRESS_SESSION_VERSION} or later`,
      { hint: 'rebuild the sandbox images: `sandpit images build`' },
    );
  if (!sandbox.gate) throw new Error('an egress session needs its sandbox gate');
  sandbox.gate.bind(createTenant({ sessionId: meta.sessionId }, meta.principal, spec.network));
  return EGRESS_SOCKET_PATH;
}
