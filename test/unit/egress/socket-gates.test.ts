/** The proxy's per-sandbox sockets: refusing until bound, gone with their sandbox, swept when stale. */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { toEntry } from '../../../src/api/egress.js';
import { buildFloor } from '../../../src/egress/floor.js';
import { createEgressProxy } from '../../../src/egress/proxy.js';
import { createSocketGates, SOCKET_NAME, type SocketGates } from '../../../src/egress/socket-gates.js';
import { createTenant, DEFAULT_EGRESS_LIMITS } from '../../../src/egress/tenant.js';
import { connectThrough, echo, echoServer, loopbackDialer, testResolver } from '../../support/egress.js';

let upstream: Awaited<ReturnType<typeof echoServer>>;
let root: string;
let gates: SocketGates;

before(async () => {
  upstream = await echoServer();
  root = join(mkdtempSync(join(tmpdir(), 'sandpit-gates-')), 'egress');
  gates = createSocketGates({
    root,
    proxy: createEgressProxy({
      floor: buildFloor(),
      limits: DEFAULT_EGRESS_LIMITS,
      backend: 'docker',
      audit: () => {},
      resolve: testResolver({ 'echo.sandpit.test': ['127.0.0.1'] }),
      dial: loopbackDialer(),
    }),
  });
});
after(async () => {
  await gates.close();
  await upstream.close();
  rmSync(join(root, '..'), { recursive: true, force: true });
});

const network = () => ({
  egress: 'allowlist' as const,
  allow: [`echo.sandpit.test:${upstream.port}`, '127.0.0.1/32'].map(toEntry),
});

test('a gate refuses until a run is bound to it, then carries that run', async () => {
  const gate = await gates.open();
  const path = join(gate.dir, SOCKET_NAME);
  assert.equal(statSync(gate.dir).mode & 0o777, 0o755);
  assert.equal(statSync(path).mode & 0o777, 0o666);
  assert.equal(statSync(root).mode & 0o777, 0o700);
  const refused = await connectThrough({ path }, `echo.sandpit.test:${upstream.port}`);
  assert.equal(refused.status, 403);
  assert.match(refused.reason, /this sandbox has no egress/);
  gate.bind(createTenant({ runId: 'r1' }, 'alice', network()));
  const open = await connectThrough({ path }, `echo.sandpit.test:${upstream.port}`);
  assert.equal(open.status, 200);
  assert.equal(await echo(open.socket, 'through the gate'), 'through the gate');
  open.socket.destroy();
  await gate.close();
  assert.equal(existsSync(gate.dir), false);
});

test('released, the directory stays; reopened, it listens again (an adopted session)', async () => {
  const gate = await gates.open();
  gate.release();
  assert.ok(existsSync(gate.dir));
  const again = await gates.reopen(gate.dir);
  again.bind(createTenant({ sessionId: 's1' }, 'alice', network()));
  const open = await connectThrough(
    { path: join(again.dir, SOCKET_NAME) },
    `echo.sandpit.test:${upstream.port}`,
  );
  assert.equal(open.status, 200);
  open.socket.destroy();
  await again.close();
});

test('reopen takes only a gate directory under the root', async () => {
  await assert.rejects(gates.reopen('/etc'), /not an egress gate directory/);
  await assert.rejects(gates.reopen(join(root, '..', 'x')), /not an egress gate directory/);
  await assert.rejects(
    gates.reopen(join(root, '0123456789abcdef', '..', '..')),
    /not an egress gate directory/,
  );
});

test('sweep removes directories no sandbox mounts and nobody listens in', async () => {
  const live = await gates.open();
  const released = await gates.open();
  released.release();
  const mounted = await gates.open();
  mounted.release();
  const stray = join(root, 'fedcba9876543210');
  mkdirSync(stray);
  const removed = await gates.sweep(new Set([mounted.dir]));
  assert.deepEqual(removed.sort(), [released.dir, stray].sort());
  assert.ok(existsSync(live.dir));
  assert.ok(existsSync(mounted.dir));
  await live.close();
  rmSync(mounted.dir, { recursive: true });
});
