// Helpers for tests against the local Kubernetes test cluster (test/env/kube-cluster.sh).
export {
  ClusterUnavailableError,
  fullImageRef,
  KubeCluster,
  type KubeTestContext,
  TEST_NAMESPACE_LABEL,
  httpStatus,
  isNotFound,
  kubeTest,
  processAlive,
  withCluster,
} from './cluster.js';
export { apiErrorMessage, collectDiagnostics, describePod } from './diagnostics.js';
export {
  CLUSTER_SCRIPT,
  type ClusterEnv,
  type IdentityName,
  loadClusterEnv,
  parseEnvLines,
  REPO_ROOT,
  START_COMMAND,
} from './env.js';
export { attachToPod, type Attached } from './attach.js';
export { execInPod, type ExecResult, exitCodeOf, framed } from './exec.js';
export { runCommand, runOk, type RunResult } from './run.js';
export {
  podFinishedOrStuck,
  podRunning,
  stuckReason,
  summarize,
  waitFor,
  waitForPod,
  WaitTimeoutError,
  type Watched,
  type WatchEventType,
} from './wait.js';
