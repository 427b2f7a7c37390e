import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toEntry } from '../../../src/api/egress.js';
import { bindSessionGate, openGate } from '../../../src/backends/egress-gates.js';
import type { EgressGate, SocketGates } from '../../../src/egress/socket-gates.js';
import type { EgressTenant } from '../../../src/egress/tenant.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { EGRESS_SOCKET_PATH } from '../../../src/runner/protocol.js';
import { EGRESS_SESSION_VERSION } from '../../../src/runner/session-protocol.js';
import { AppError } from '../../../src/shared/errors.js';
import { sessionSpec } from '../../support/sessions.js';

/** A gate that records what it is bound to. */
function fakeGate(): EgressGate & { bound: EgressTenant[] } {
  const bound: EgressTenant[] = [];
  return {
    dir: '/gates/0123456789abcdef',
    bound,
    bind: (t) => void bound.push(t),
    get tenant() {
      return bound.at(-1);
    },
    close: () => Promise.resolve(),
    release: () => {},
  };
}

const gates = (gate: EgressGate): SocketGates => ({
  root: '/gates',
  open: () => Promise.resolve(gate),
  reopen: () => Promise.reject(new Error('not here')),
  sweep: () => Promise.resolve([]),
  close: () => Promise.resolve(),
});

const policy = createPolicy({ egress: { disabled: false, ceiling: [toEntry('pypi.org')] } });
const egressSpec = sessionSpec({ template: 'python', network: { egress: 'allowlist' } }, policy);

describe('a sandbox’s egress gate', () => {
  test('none without egress, whatever gates there are', async () => {
    assert.equal(await openGate(gates(fakeGate()), { network: { egress: 'none' } }, 'sandbox'), undefined);
    assert.equal(await openGate(undefined, { network: { egress: 'none' } }, 'session'), undefined);
  });

  test('an allowlist sandbox gets a new gate, unbound', async () => {
    const gate = fakeGate();
    assert.equal(await openGate(gates(gate), egressSpec, 'sandbox'), gate);
    assert.equal(gate.tenant, undefined);
  });

  test('refused where this gateway runs no proxy, naming the settings', async () => {
    await assert.rejects(openGate(undefined, egressSpec, 'session'), (e: unknown) => {
      assert.ok(e instanceof AppError);
      assert.equal(e.code, 'UNSUPPORTED');
      assert.match(e.message, /this gateway runs no egress proxy, so no session may have an allowlist/);
      assert.match(e.hint ?? '', /DISABLE_NETWORK=false/);
      return true;
    });
  });

  test("a session's allowlist is bound to its gate once its runner speaks egress; the socket's path inside", async () => {
    const gate = fakeGate();
    const path = await bindSessionGate(
      { gate, protocol: () => Promise.resolve(EGRESS_SESSION_VERSION) },
      egressSpec,
      { sessionId: 's1', principal: 'ci' },
    );
    assert.equal(path, EGRESS_SOCKET_PATH);
    assert.deepEqual(
      gate.bound.map((t) => [t.subject, t.principal, t.network]),
      [[{ sessionId: 's1' }, 'ci', egressSpec.network]],
    );
  });

  test('an older runner is refused, and nothing is bound', async () => {
    const gate = fakeGate();
    await assert.rejects(
      bindSessionGate({ gate, protocol: () => Promise.resolve(EGRESS_SESSION_VERSION - 1) }, egressSpec, {
        sessionId: 's1',
        principal: 'ci',
      }),
      /IMAGE_OUTDATED|egress needs/,
    );
    assert.deepEqual(gate.bound, []);
  });
});
