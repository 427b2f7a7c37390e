/**
 * Output files through the SDK's real client (issue 18), shared by the stdio and HTTP e2e tests:
 * images come back as image content, other files as resource links whose resources/read returns
 * their bytes, the resource template lists the run's files, and REST serves them one by one and as
 * a tar stream.
 */
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { extract } from 'tar-stream';
import { callTool } from './helpers.js';

/** Python (stdlib only) that writes a real 8x8 PNG to `name`. */
export const WRITE_PNG = (name: string): string =>
  [
    'import struct, zlib',
    'def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)',
    'raw = b"".join(b"\\x00" + b"\\xff\\x00\\x00" * 8 for _ in range(8))',
    `open(${JSON.stringify(name)}, "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))`,
  ].join('\n');

export interface FilesSeen {
  runId: string;
  result: CallToolResult;
  structured: Record<string, unknown>;
}

/** run_code with outputs; asserts the result's content: text first, then images, then links. */
export async function runWithFiles(client: Client, args: Record<string, unknown>): Promise<FilesSeen> {
  const result = await callTool(client, 'run_code', args);
  const structured = result.structuredContent as Record<string, unknown>;
  assert.equal(structured.phase, 'Succeeded', JSON.stringify(structured));
  assert.equal(result.content[0]?.type, 'text');
  return { runId: structured.runId as string, result, structured };
}

/**
 * A plot as image content and a CSV as a resource link that resources/read resolves; the
 * resource template is listed, and its list has the run's files.
 */
export async function imagesInlineOthersLinked(client: Client, template = 'python'): Promise<string> {
  const { runId, result } = await runWithFiles(client, {
    language: template,
    code: `${WRITE_PNG('plot.png')}\nopen("data.csv", "w").write("x,y\\n1,2\\n")`,
    outputs: ['*.png', 'data.csv', 'missing.txt'],
  });
  const images = result.content.filter((c) => c.type === 'image');
  assert.equal(images.length, 1);
  assert.equal(images[0]?.mimeType, 'image/png');
  assert.deepEqual([...Buffer.from(images[0].data, 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
  const links = result.content.filter((c) => c.type === 'resource_link');
  assert.deepEqual(
    links.map((l) => [l.name, l.mimeType, l.size]),
    [['data.csv', 'text/csv', 8]],
  );
  const uri = links[0]!.uri;
  assert.equal(uri, `sandpit://runs/${runId}/files/data.csv`);
  const read = await client.readResource({ uri });
  assert.deepEqual(read.contents, [{ uri, mimeType: 'text/csv', text: 'x,y\n1,2\n' }]);
  const png = await client.readResource({ uri: `sandpit://runs/${runId}/files/plot.png` });
  assert.equal(png.contents[0]?.mimeType, 'image/png');
  assert.ok('blob' in png.contents[0] && png.contents[0].blob.length > 0);

  const text = result.content[0]?.type === 'text' ? result.content[0].text : '';
  assert.match(text, /missing\.txt: NoMatch/, 'what was not returned is named in the text too');

  const templates = await client.listResourceTemplates();
  assert.ok(templates.resourceTemplates.some((t) => t.uriTemplate === 'sandpit://runs/{id}/files/{+path}'));
  const listed = await client.listResources();
  const ours = listed.resources
    .filter((r) => r.uri.startsWith(`sandpit://runs/${runId}/`))
    .map((r) => r.name);
  assert.deepEqual(ours.sort(), [`${runId}/data.csv`, `${runId}/plot.png`]);

  await assert.rejects(
    client.readResource({ uri: `sandpit://runs/${runId}/files/missing.txt` }),
    /NOT_FOUND|no file/,
  );
  await assert.rejects(
    client.readResource({ uri: 'sandpit://runs/run-000000000000/files/x' }),
    /no run|NOT_FOUND/,
  );
  return runId;
}

/** REST: one file with its media type and no chance to run as a page; all of them as a tar. */
export async function restServesTheFiles(url: string, runId: string, headers: Record<string, string> = {}) {
  const csv = await fetch(`${url}/runs/${runId}/files/data.csv`, { headers });
  assert.equal(csv.status, 200);
  assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
  assert.equal(csv.headers.get('x-content-type-options'), 'nosniff');
  assert.match(csv.headers.get('content-security-policy') ?? '', /sandbox/);
  assert.equal(await csv.text(), 'x,y\n1,2\n');
  const missing = await fetch(`${url}/runs/${runId}/files/nope.txt`, { headers });
  assert.equal(missing.status, 404);
  await missing.body?.cancel();

  const tar = await fetch(`${url}/runs/${runId}/artifacts`, { headers });
  assert.equal(tar.status, 200);
  assert.equal(tar.headers.get('content-type'), 'application/x-tar');
  const entries = await untar(Buffer.from(await tar.arrayBuffer()));
  assert.deepEqual([...entries.keys()].sort(), ['data.csv', 'plot.png']);
  assert.equal(entries.get('data.csv')?.toString(), 'x,y\n1,2\n');
}

async function untar(data: Buffer): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const ex = extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on('entry', (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => void chunks.push(c as Buffer));
      stream.on('end', () => {
        files.set(header.name, Buffer.concat(chunks));
        next();
      });
    });
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  ex.end(data);
  await done;
  return files;
}

/**
 * python-data: a plot saved with savefig, a figure shown (plt.show()) and one never closed all
 * come back as image content with no outputs named; a CSV the run names comes back as a link.
 */
export async function matplotlibPlotsComeBack(client: Client): Promise<string> {
  const { runId, result, structured } = await runWithFiles(client, {
    language: 'python-data',
    code: [
      'import matplotlib.pyplot as plt, numpy as np, pandas as pd, scipy, PIL',
      'plt.plot(np.arange(5), np.arange(5) ** 2)',
      'plt.savefig("plot.png")',
      'plt.figure(); plt.plot([3, 2, 1]); plt.show()',
      'plt.figure(); plt.bar([1, 2], [2, 1])',
      'pd.DataFrame({"x": [1, 2]}).to_csv("data.csv", index=False)',
      'print(plt.get_backend())',
    ].join('\n'),
  });
  assert.match(structured.stdout as string, /sandpit_matplotlib/);
  assert.equal(structured.stderr, '', 'no warning about a non-interactive backend or a font cache');
  const images = result.content.filter((c) => c.type === 'image');
  assert.deepEqual(
    images.map((i) => i.mimeType),
    ['image/png', 'image/png', 'image/png'],
  );
  for (const image of images) {
    assert.deepEqual([...Buffer.from(image.data, 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
  }
  const outputs = structured.outputs as { files: { path: string }[] };
  assert.deepEqual(
    outputs.files.map((f) => f.path),
    ['figure_2.png', 'figure_3.png', 'plot.png'],
  );
  assert.equal(
    result.content.filter((c) => c.type === 'resource_link').length,
    0,
    'the CSV was not asked for',
  );

  const named = await runWithFiles(client, {
    language: 'python-data',
    code: 'import pandas as pd\npd.DataFrame({"x": [1, 2]}).to_csv("data.csv", index=False)',
    outputs: ['data.csv'],
  });
  const link = named.result.content.find((c) => c.type === 'resource_link');
  assert.ok(link && link.type === 'resource_link');
  const read = await client.readResource({ uri: link.uri });
  assert.deepEqual(read.contents, [{ uri: link.uri, mimeType: 'text/csv', text: 'x\n1\n2\n' }]);
  return runId;
}
