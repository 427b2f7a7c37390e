/**
 * The proxy credential of a sandbox on Kubernetes, which the pod presents as the user and password
 * of its proxy URL (`http://run-<uid>:<credential>@<proxy>:3128`): the user names the SandboxRun or
 * Sandbox by UID, the password is HMAC-SHA256 of that name under a key only the operator and the
 * proxy hold. So it is unguessable and different for every sandbox, the operator writes it into the
 * sandbox's own Secret (or its job), and the proxy checks it without reading any Secret, from the
 * name alone, before it even looks the sandbox up. Pure.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type EgressOwnerKind = 'run' | 'sandbox';

export interface ProxyIdentity {
  kind: EgressOwnerKind;
  uid: string;
}

const UID = /^[0-9a-f][0-9a-f-]{7,63}$/;

export const proxyUser = (id: ProxyIdentity): string => `${id.kind}-${id.uid}`;

export function egressCredential(key: Buffer, id: ProxyIdentity): string {
  return createHmac('sha256', key).update(proxyUser(id)).digest('base64url');
}

/** The identity a `Proxy-Authorization: Basic …` header claims, when its credential is the right one. */
export function verifyProxyAuthorization(key: Buffer, header: string | undefined): ProxyIdentity | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  if (colon < 0) return undefined;
  const user = text.slice(0, colon);
  const dash = user.indexOf('-');
  const kind = user.slice(0, dash);
  const uid = user.slice(dash + 1);
  if ((kind !== 'run' && kind !== 'sandbox') || !UID.test(uid)) return undefined;
  const id: ProxyIdentity = { kind, uid };
  const want = Buffer.from(egressCredential(key, id));
  const got = Buffer.from(text.slice(colon + 1));
  return got.length === want.length && timingSafeEqual(got, want) ? id : undefined;
}
