/**
 * Kubernetes objects as sandpit holds them: plain JSON, exactly as the apiserver sent it. client-node's
 * typed responses carry Date instances where its watch events carry strings (notes/libraries.md §1.4),
 * so every object the adapter returns goes through plain() once, and the types say so: `Plain<V1Pod>`
 * has strings where `V1Pod` has Dates. The rest of sandpit uses these types, never client-node's.
 */
import type {
  CoreV1Event,
  V1ConfigMap,
  V1Container,
  V1ContainerStatus,
  V1Lease,
  V1NetworkPolicy,
  V1NetworkPolicyEgressRule,
  V1NetworkPolicySpec,
  V1ObjectMeta,
  V1OwnerReference,
  V1Pod,
  V1PodSecurityContext,
  V1PodSpec,
  V1RuntimeClass,
  V1Secret,
  V1SecurityContext,
  V1Service,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';

/** A client-node model as JSON: every Date an RFC 3339 string. */
export type Plain<T> = T extends Date
  ? string
  : T extends readonly (infer U)[]
    ? Plain<U>[]
    : T extends object
      ? { [K in keyof T]: Plain<T[K]> }
      : T;

export type ObjectMeta = Plain<V1ObjectMeta>;
export type OwnerReference = Plain<V1OwnerReference>;
export type Pod = Plain<V1Pod>;
export type PodSpec = Plain<V1PodSpec>;
export type Container = Plain<V1Container>;
export type ContainerStatus = Plain<V1ContainerStatus>;
export type PodSecurityContext = Plain<V1PodSecurityContext>;
export type SecurityContext = Plain<V1SecurityContext>;
export type Volume = Plain<V1Volume>;
export type VolumeMount = Plain<V1VolumeMount>;
export type ConfigMap = Plain<V1ConfigMap>;
export type NetworkPolicy = Plain<V1NetworkPolicy>;
export type NetworkPolicySpec = Plain<V1NetworkPolicySpec>;
export type NetworkPolicyEgressRule = Plain<V1NetworkPolicyEgressRule>;
export type Secret = Plain<V1Secret>;
export type Service = Plain<V1Service>;
export type RuntimeClass = Plain<V1RuntimeClass>;
export type Lease = Plain<V1Lease>;
export type KubeEvent = Plain<CoreV1Event>;

/** Any stored object, as far as the adapter reads it. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

/** Typed models → the JSON the apiserver sent (dates as RFC 3339 strings, no undefined fields). */
export function plain<T>(value: T): Plain<T> {
  return JSON.parse(JSON.stringify(value)) as Plain<T>;
}

/** `namespace/name`: how caches and work queues key an object. */
export function objectKey(obj: KubeObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

/** A MicroTime (Lease renewTime): RFC 3339 with microseconds, as the apiserver wants it. */
export const microTime = (ms: number): string => new Date(ms).toISOString().replace(/Z$/, '000Z');
