/** What every part of `evaluate()` is given: the policy, the caller's scope, and where to report a violation. */
import type { EgressEntry } from '../api/egress.js';
import type { Violation } from '../shared/errors.js';
import type { Policy } from './policy.js';

/** What a caller's credentials narrow the policy to (token scopes). */
export interface Scope {
  templates?: readonly string[];
  images?: readonly string[];
  /** The most its sandboxes may reach (`auth.tokens[].egress`), within the config's ceiling. */
  egress?: readonly EgressEntry[];
}

export interface Decision {
  policy: Policy;
  scope: Scope;
  deny: (v: Violation) => void;
}
