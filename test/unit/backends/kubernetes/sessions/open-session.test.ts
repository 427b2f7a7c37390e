// The open of a session on Kubernetes: with an egress allowlist it names the proxy variables the
// runner passes on from its pod's env (the gateway never holds the credential); an older runner's
// refusal of those records reads as an outdated image.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toEntry } from '../../../../../src/api/egress.js';
import {
  kubernetesOpenRequest,
  openFailure,
} from '../../../../../src/backends/kubernetes/sessions/open-session.js';
import { openRequest } from '../../../../../src/backends/session-meta.js';
import { AppError } from '../../../../../src/shared/errors.js';
import { sessionPolicy, sessionSpec } from '../../../../support/sessions.js';

const policy = sessionPolicy({ egress: { disabled: false, ceiling: ['pypi.org'].map(toEntry) } });
const meta = { sessionId: 'ses-0123456789abcdef', principal: 'alice', createdAt: 0 };
const egress = sessionSpec(
  { template: 'python', network: { egress: 'allowlist', allow: ['pypi.org'] } },
  policy,
);
const none = sessionSpec({ template: 'python' }, policy);
const refused = new AppError('INVALID_REQUEST', 'unknown open record 0x76');

describe('kubernetesOpenRequest', () => {
  test('with an allowlist: the open as on any backend, plus the names of the proxy variables', () => {
    assert.deepEqual(kubernetesOpenRequest(egress, meta), {
      ...openRequest(egress, meta),
      inheritEnv: ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy'],
    });
    const text = JSON.stringify(kubernetesOpenRequest(egress, meta).env);
    assert.ok(!/PROXY/.test(text), 'no proxy value travels in the open');
  });

  test('without one: exactly the shared open', () => {
    assert.deepEqual(kubernetesOpenRequest(none, meta), openRequest(none, meta));
  });
});

describe('openFailure', () => {
  test("an allowlisted session's refused open: IMAGE_OUTDATED, naming the protocol and the rebuild", () => {
    const e = openFailure(refused, egress);
    assert.ok(e instanceof AppError);
    assert.equal(e.code, 'IMAGE_OUTDATED');
    assert.match(e.message, /session protocol 7 or later/);
    assert.match(e.message, /unknown open record 0x76/);
  });

  test('any other failure stays what it was', () => {
    assert.equal(openFailure(refused, none), refused);
    const timeout = new AppError('BACKEND_ERROR', 'no answer');
    assert.equal(openFailure(timeout, egress), timeout);
  });
});
