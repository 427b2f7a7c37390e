/**
 * Whose connections the egress proxy carries: one run or session, with its allowlist and its
 * usage against the per-sandbox limits (connections open at once, bytes in all). The backend that
 * made the sandbox makes its tenant; the proxy only reads the allowlist and counts.
 */
import type { EffectiveNetwork } from '../api/egress.js';

/** The per-sandbox limits (config `sandbox.egress`). */
export interface EgressLimits {
  maxConnections: number;
  /** Bytes both ways together, over the sandbox's whole life. */
  maxBytes: number;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

export const DEFAULT_EGRESS_LIMITS: EgressLimits = {
  maxConnections: 32,
  maxBytes: 1024 ** 3,
  connectTimeoutMs: 10_000,
  idleTimeoutMs: 60_000,
};

/** Which sandbox: a run's or a session's. */
export type EgressSubject = { runId: string } | { sessionId: string };

export interface EgressTenant {
  readonly subject: EgressSubject;
  /** Who owns the sandbox (a principal's name). */
  readonly principal: string;
  readonly network: EffectiveNetwork;
  /** Mutable: the proxy counts here. */
  readonly usage: { open: number; bytes: number };
}

export function createTenant(
  subject: EgressSubject,
  principal: string,
  network: EffectiveNetwork,
): EgressTenant {
  return { subject, principal, network, usage: { open: 0, bytes: 0 } };
}

/** Why a connection may not open now (a limit reached), or undefined. */
export function limitReached(tenant: EgressTenant, limits: EgressLimits): string | undefined {
  if (tenant.usage.open >= limits.maxConnections)
    return `this sandbox already has ${limits.maxConnections} connections open through the egress proxy (sandbox.egress.maxConnections)`;
  if (tenant.usage.bytes >= limits.maxBytes)
    return `this sandbox has moved its ${limits.maxBytes} bytes through the egress proxy (sandbox.egress.maxBytes)`;
  return undefined;
}
