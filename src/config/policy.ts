import { toEntry } from '../api/egress.js';
import { createPolicy, type Policy } from '../policy/policy.js';
import type { Config } from './schema.js';

/** The policy that a configuration describes. */
export function policyFromConfig(config: Config): Policy {
  const s = config.sandbox;
  return createPolicy({
    ...(s.imageAllowlist ? { imageAllowlist: s.imageAllowlist } : {}),
    ...(s.runtime ? { defaultRuntime: s.runtime } : {}),
    ...(s.allowedRuntimes ? { allowedRuntimes: s.allowedRuntimes } : {}),
    egress: { disabled: s.disableNetwork, ceiling: s.egress.allow.map(toEntry) },
    ceilings: {
      cpuMilli: s.maxCpu,
      memoryBytes: s.maxMemory,
      pids: s.maxPids,
      workspaceBytes: s.maxWorkspace,
      tmpBytes: s.tmpSize,
      timeoutSeconds: s.timeoutSeconds,
      outputBytes: s.maxOutputBytes,
      requestBytes: s.maxRequestBytes,
      downloadBytes: s.maxDownloadBytes,
    },
    sessions: {
      ttlSeconds: config.sessions.ttlSeconds,
      maxTtlSeconds: config.sessions.maxTtlSeconds,
      idleTimeoutSeconds: config.sessions.idleTimeoutSeconds,
      maxIdleTimeoutSeconds: config.sessions.maxIdleTimeoutSeconds,
      maxExecs: config.sessions.maxExecs,
    },
  });
}

/** The policy for pods: the sandbox limits, with RuntimeClasses in place of Docker runtimes. */
export function operatorPolicy(config: Config): Policy {
  const k = config.kubernetes;
  return {
    ...policyFromConfig(config),
    defaultRuntime: k.runtimeClassName,
    allowedRuntimes: k.allowedRuntimeClasses ?? (k.runtimeClassName ? [k.runtimeClassName] : []),
  };
}
