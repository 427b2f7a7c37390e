/** The thin @kubernetes/client-node adapter: one client, one informer, one error type. */
export {
  createKubeClient,
  type KubeClient,
  type KubeObject,
  type ListPage,
  type ListQuery,
} from './client.js';
export { currentNamespace, loadKubeConfig, type KubeConfigSource } from './config.js';
export {
  isAlreadyExists,
  isConflict,
  isForbidden,
  isGone,
  isNotFound,
  KubeApiError,
  kubeCall,
  toKubeError,
} from './errors.js';
export {
  Informer,
  objectKey,
  type InformerEventType,
  type InformerOptions,
  type InformerSource,
  type WatchRestartReason,
} from './informer.js';
