/** Where credentials come from: a kubeconfig file, or the pod's service account. */
import { KubeConfig } from '@kubernetes/client-node';
import { AppError } from '../shared/errors.js';

export type { KubeConfig };

export interface KubeConfigSource {
  /** A kubeconfig file; wins when given. */
  kubeconfigPath?: string | undefined;
  /** Running in a pod (KUBERNETES_SERVICE_HOST is set): use the service account. */
  inCluster: boolean;
}

export function loadKubeConfig(source: KubeConfigSource): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (source.kubeconfigPath) kc.loadFromFile(source.kubeconfigPath);
    else if (source.inCluster) kc.loadFromCluster();
    else kc.loadFromDefault();
  } catch (e) {
    throw new AppError('CONFIG_INVALID', `cannot load Kubernetes credentials: ${(e as Error).message}`, {
      cause: e,
      hint: 'pass --kubeconfig FILE (or set KUBECONFIG), or run in a pod with a service account',
    });
  }
  if (!kc.getCurrentCluster()) {
    throw new AppError('CONFIG_INVALID', 'the kubeconfig names no current cluster', {
      hint: 'pass --kubeconfig FILE with a current-context, or run in a pod with a service account',
    });
  }
  return kc;
}

/** The namespace of the current context (the service account's namespace in a pod). */
export function currentNamespace(kc: KubeConfig): string | undefined {
  const context = kc.getContextObject(kc.getCurrentContext());
  return context?.namespace || undefined;
}
