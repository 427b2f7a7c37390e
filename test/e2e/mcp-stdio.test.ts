/**
 * The built CLI (`node dist/cmd/cli.js mcp`) over stdio with the SDK's real Client, on the real
 * Docker engine: every tool, streamed output, cancellation (by the client and by cancel_run), denials.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import { requireDocker } from '../support/docker.js';
import { connectStdio, containersOfPid, ensureBuilt, waitFor, type Connected } from './helpers.js';
import {
  cancelRunTool,
  clientCancellationStopsTheRun,
  everyToolWorks,
  logLevelIsHonoured,
  outputStreamsBeforeResult,
  policyDenialNamesTheField,
} from './scenarios.js';

describe('sandpit mcp (stdio, built CLI)', () => {
  let docker: Docker;
  let server: Connected;

  before(async () => {
    docker = await requireDocker();
    ensureBuilt();
    server = await connectStdio();
  });
  after(async () => {
    await server?.close();
  });

  test('every tool answers its happy path', () => everyToolWorks(server.client));
  test('output streams as notifications before the final result', async () => {
    await outputStreamsBeforeResult(server.client);
  });
  test('a client cancellation stops the run and removes its container', () =>
    clientCancellationStopsTheRun(server.client, docker, server.pid!));
  test('cancel_run stops a live run; the record stays readable', () =>
    cancelRunTool(server.client, docker, server.pid!));
  test('a policy denial names its field and limit', () => policyDenialNamesTheField(server.client));
  test('logging/setLevel above info silences output logs, not progress', () =>
    logLevelIsHonoured(server.client));

  test('closing the client stops the server and leaves no container', async () => {
    const other = await connectStdio();
    const pid = other.pid!;
    void other.client
      .callTool({ name: 'run_code', arguments: { code: 'import time\ntime.sleep(60)' } })
      .catch(() => undefined);
    await waitFor('the run container', async () =>
      (await containersOfPid(docker, pid)).length > 0 ? true : undefined,
    );
    await other.close();
    // A generous bound: on two loaded cores the engine can take tens of seconds to remove one.
    await waitFor(
      'the server to remove its containers',
      async () => ((await containersOfPid(docker, pid)).length === 0 ? true : undefined),
      60_000,
    );
    assert.throws(() => process.kill(pid, 0), 'the server process has exited');
  });
});
