/**
 * The engine probe asks on a connection of its own: an engine that answers `/_ping` is up, one whose
 * socket is gone or closed (a dockerd shutting down closes its listener first) is not, even while
 * a kept-alive connection to it still works.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { engineAnswers } from '../../../../src/backends/docker/engine-probe.js';

const dir = mkdtempSync(join(tmpdir(), 'sandpit-probe-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function listen(path: string, status = 200): Promise<Server> {
  const server = createServer((req, res) => {
    res.statusCode = req.url === '/_ping' ? status : 404;
    res.end('OK');
  });
  return new Promise((resolve) => server.listen(path, () => resolve(server)));
}

const unused = () => Promise.reject(new Error('a socket engine is asked on its socket'));

test('an engine that answers /_ping on its socket is up', async () => {
  const socketPath = join(dir, 'up.sock');
  const server = await listen(socketPath);
  try {
    assert.equal(await engineAnswers({ socketPath }, unused), true);
  } finally {
    server.close();
  }
});

test('an engine that answers /_ping with an error, or has no socket, is not up', async () => {
  const socketPath = join(dir, 'failing.sock');
  const server = await listen(socketPath, 503);
  try {
    assert.equal(await engineAnswers({ socketPath }, unused), false);
  } finally {
    server.close();
  }
  assert.equal(await engineAnswers({ socketPath: join(dir, 'none.sock') }, unused), false);
});

test('a closed listener is not up, though a connection made before is still served', async () => {
  const socketPath = join(dir, 'closing.sock');
  const server = createServer((req, res) => {
    if (req.url === '/_ping') return void res.end('OK');
    res.write('streaming'); // held open, as dockerd's event streams and attaches are while it shuts down
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  try {
    const open = await new Promise<IncomingMessage>((resolve) =>
      request({ socketPath, path: '/events' }, resolve).end(),
    );
    server.close(); // the listener only: the open connection stays, as dockerd's do
    assert.equal(open.destroyed, false, 'the connection made before is still open');
    assert.equal(await engineAnswers({ socketPath }, unused), false);
    open.destroy();
  } finally {
    server.closeAllConnections();
  }
});

test('an engine over TCP is asked with its client', async () => {
  assert.equal(await engineAnswers({}, () => Promise.resolve('OK')), true);
  assert.equal(await engineAnswers({}, () => Promise.reject(new Error('ECONNREFUSED'))), false);
});
