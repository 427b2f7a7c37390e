/** What every part of `evaluate()` is given: the policy, the caller's scope, and where to report a violation. */
import type { Violation } from '../shared/errors.js';
import type { Policy } from './policy.js';

/** What a caller's credentials narrow the policy to (token scopes). */
export interface Scope {
  templates?: readonly string[];
  images?: readonly string[];
}

export interface Decision {
  policy: Policy;
  scope: Scope;
  deny: (v: Violation) => void;
}
