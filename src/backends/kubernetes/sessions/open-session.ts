/**
 * The open request of a session on Kubernetes. With an egress allowlist, the runner passes on to
 * every exec the proxy variables its pod has from the Sandbox's own Secret (the operator put them
 * there; the gateway never sees the credential): the open names them ('v' records, session
 * protocol 7). An older runner refuses those records, so that session fails as IMAGE_OUTDATED. Pure.
 */
import type { EffectiveSessionSpec } from '../../../policy/session.js';
import { EGRESS_ENV_NAMES } from '../../../runner/protocol.js';
import type { OpenParams } from '../../../runner/session-client.js';
import { INHERIT_ENV_SESSION_VERSION } from '../../../runner/session-protocol.js';
import { AppError } from '../../../shared/errors.js';
import { openRequest, type SessionMeta } from '../../session-meta.js';

export function kubernetesOpenRequest(
  spec: EffectiveSessionSpec,
  meta: Omit<SessionMeta, 'v' | 'spec'>,
): OpenParams {
  return {
    ...openRequest(spec, meta),
    ...(spec.network.egress === 'allowlist' ? { inheritEnv: EGRESS_ENV_NAMES } : {}),
  };
}

/** What the runner's refusal of the open means: for a session with an allowlist, an outdated runner. */
export function openFailure(e: unknown, spec: EffectiveSessionSpec): unknown {
  if (spec.network.egress !== 'allowlist' || !(e instanceof AppError) || e.code !== 'INVALID_REQUEST')
    return e;
  return new AppError(
    'IMAGE_OUTDATED',
    `the runner in image ${spec.image} refused the open of a session with an egress allowlist (${e.message}): it needs session protocol ${INHERIT_ENV_SESSION_VERSION} or later`,
    { hint: 'rebuild the sandbox images: `sandpit images build`' },
  );
}
