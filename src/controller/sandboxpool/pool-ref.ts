/** A SandboxPool as its pods and Events refer to it, and the labels its pods carry. */
import {
  LABEL_COMPONENT,
  LABEL_MANAGED_BY,
  LABEL_POOL,
  LABEL_POOL_POD,
  LABEL_POOL_SHAPE,
  LABEL_POOL_UID,
  labelValueFor,
  MANAGED_BY_OPERATOR,
  POOL_POD_IDLE,
} from '../../api/v1alpha1/labels.js';
import { SANDBOX_POOL } from '../../api/v1alpha1/sandboxpool.js';
import type { ObjectMeta } from '../../kube/objects.js';
import { controllerRef, type ObjectRef } from '../children.js';

export function poolRef(pool: { name: string; namespace: string; uid: string }): ObjectRef {
  return { apiVersion: SANDBOX_POOL.apiVersion, kind: SANDBOX_POOL.kind, ...pool };
}

/** The label selector of the pool's unclaimed pods (status.selector, for the /scale subresource). */
export const idlePodSelector = (pool: ObjectRef): string =>
  `${LABEL_POOL_UID}=${pool.uid},${LABEL_POOL_POD}=${POOL_POD_IDLE}`;

/** The longest generateName prefix kept of the pool's name (the apiserver adds 5 characters). */
const NAME_PREFIX_CHARS = 57;

/** The metadata of a new pool pod: named after the pool, its labels, and the pool as its controller. */
export function poolPodMeta(pool: ObjectRef, shapeLabel: string): ObjectMeta {
  const base = pool.name.slice(0, NAME_PREFIX_CHARS).replace(/[-.]+$/, '');
  return {
    generateName: `${base}-`,
    namespace: pool.namespace,
    labels: {
      [LABEL_MANAGED_BY]: MANAGED_BY_OPERATOR,
      [LABEL_COMPONENT]: 'sandbox',
      [LABEL_POOL]: labelValueFor(pool.name),
      [LABEL_POOL_UID]: pool.uid,
      [LABEL_POOL_POD]: POOL_POD_IDLE,
      [LABEL_POOL_SHAPE]: shapeLabel,
    },
    ownerReferences: [controllerRef(pool)],
  };
}
