/**
 * Output files end to end on the real Docker engine (issue 18), through the built CLI and the
 * SDK's real client: `sandpit mcp` over stdio, and `sandpit serve` over Streamable HTTP and REST.
 */
import { after, before, describe, test } from 'node:test';
import { requireDocker } from '../support/docker.js';
import {
  connectHttp,
  connectStdio,
  ensureBuilt,
  startServe,
  type Connected,
  type Served,
} from './helpers.js';
import {
  imagesInlineOthersLinked,
  matplotlibPlotsComeBack,
  restServesTheFiles,
} from './outputs-scenarios.js';

describe('output files over stdio (sandpit mcp)', () => {
  let server: Connected;
  before(async () => {
    await requireDocker();
    ensureBuilt();
    server = await connectStdio();
  });
  after(() => server?.close());

  test('an image comes back as image content; a CSV as a resource link that resources/read resolves', async () => {
    await imagesInlineOthersLinked(server.client);
  });
  test('python-data: a saved plot, a shown figure and one left open come back as images', async () => {
    await matplotlibPlotsComeBack(server.client);
  });
});

describe('output files over HTTP (sandpit serve): MCP and REST', () => {
  let served: Served;
  let client: Connected;
  const TOKEN = 'outputs-e2e-token';
  const headers = { Authorization: `Bearer ${TOKEN}` };
  before(async () => {
    await requireDocker();
    ensureBuilt();
    served = await startServe({ auth: { token: TOKEN } });
    client = await connectHttp(`${served.url}/mcp`, TOKEN);
  });
  after(async () => {
    await client?.close();
    await served?.stop();
  });

  test('the same over Streamable HTTP, and REST serves the files one by one and as a tar', async () => {
    const runId = await imagesInlineOthersLinked(client.client);
    await restServesTheFiles(served.url, runId, headers);
  });
  test('python-data over Streamable HTTP: matplotlib plots come back as images', async () => {
    await matplotlibPlotsComeBack(client.client);
  });
});
