/** The Kubernetes backend: SandboxRuns in, RunResults out (the operator does the rest). */
export { KubernetesBackend, type KubernetesBackendOptions } from './kubernetes-backend.js';
export { buildSandboxRun, type BuildOptions } from './build-sandbox-run.js';
export {
  GATEWAY_PERMISSIONS,
  GATEWAY_LEASE_ROLE,
  GATEWAY_ROLE,
  type GatewayPermission,
} from './permissions.js';
