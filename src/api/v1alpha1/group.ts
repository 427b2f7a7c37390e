/** The sandpit.dev/v1alpha1 API group, and how each of its kinds is named. */
export const GROUP = 'sandpit.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** A kind of the group: its CRD names, and what the Kubernetes adapter needs to address it. */
export interface CustomKind {
  group: typeof GROUP;
  version: typeof VERSION;
  apiVersion: typeof API_VERSION;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
}

/** A kind of sandpit.dev/v1alpha1, named the Kubernetes way (`SandboxRun`, `sandboxruns`, `sandboxrun`). */
export function defineKind(kind: string, plural: string, shortNames: readonly string[]): CustomKind {
  return {
    group: GROUP,
    version: VERSION,
    apiVersion: API_VERSION,
    kind,
    listKind: `${kind}List`,
    plural,
    singular: kind.toLowerCase(),
    shortNames,
  };
}

/** The CRD's name: `sandboxruns.sandpit.dev`. */
export const crdName = (kind: Pick<CustomKind, 'plural' | 'group'>): string => `${kind.plural}.${kind.group}`;
