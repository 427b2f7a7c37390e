/**
 * RBAC rules as comparable grants (`apiGroup/resource:verb`, sorted), for the tests that check a
 * Role in deploy/ or the chart against the permissions the code declares.
 */
export interface RbacRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** The grants of a Role's rules. */
export const grantsOf = (rules: readonly RbacRule[]): string[] =>
  rules
    .flatMap((r) =>
      r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g}/${res}:${v}`))),
    )
    .sort();

/** The grants a list of declared permissions asks for. */
export const grantsFor = (
  perms: readonly { apiGroup: string; resource: string; verbs: readonly string[] }[],
): string[] => perms.flatMap((p) => p.verbs.map((v) => `${p.apiGroup}/${p.resource}:${v}`)).sort();
