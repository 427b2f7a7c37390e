// Output files end to end in Kubernetes mode (issue 18): the built CLI's `sandpit serve` with
// sandbox.backend: kubernetes and a real operator process. A python-data plot comes back to the
// SDK's real client as image content and a CSV as a resource link; the operator keeps them in a
// ConfigMap the run owns, so a restarted gateway (or any replica) still serves resources/read.
// The caps (a ConfigMap's 960 KiB in all on Kubernetes) and confinement are named in the result;
// a warm run (a pool pod of its shape) returns its files over the attach.
// With SANDPIT_TEST_IMAGE_REPO the runs use that repository's images (a worktree's own runner).
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { RunOutputs } from '../../src/api/outputs.js';
import { MAX_RUN_FILES_BYTES, runFilesName } from '../../src/api/v1alpha1/run-files.js';
import { callTool, connectHttp, ensureBuilt, textOf, type Connected, type Served } from '../e2e/helpers.js';
import {
  failureMarkingTest,
  getRun,
  startSuite,
  stopSuite,
  type Suite,
} from '../integration/kubernetes/operator-harness.js';
import { specWith, testTemplates } from '../support/docker.js';
import { withCluster } from '../support/kube/index.js';
import { bindGatewayRbac, serveKubernetesGateway } from './kube-gateway.js';
import { CONTRACT_SANDBOX_CONFIG, OUTPUT_BYTES } from './target.js';
import { createPolicy } from '../../src/policy/policy.js';
import { WRITE_PNG } from '../e2e/outputs-scenarios.js';
import {
  createPool,
  deletePool,
  poolSpecFor,
  waitPoolReady,
} from '../integration/kubernetes/pool-harness.js';

const KiB = 1024;
const REPO = process.env.SANDPIT_TEST_IMAGE_REPO;
const SANDBOX = {
  ...CONTRACT_SANDBOX_CONFIG,
  imageAllowlist: [...CONTRACT_SANDBOX_CONFIG.imageAllowlist, ...(REPO ? [`${REPO}/*`] : [])],
};
const imageOf = (template: string): string => testTemplates().find((t) => t.name === template)!.image;

let suite: Suite;
let served: Served;
let conn: Connected;
let failed = false;

const serve = (): Promise<Served> => serveKubernetesGateway(suite, SANDBOX);

interface Ran {
  runId: string;
  result: CallToolResult;
  structured: Record<string, unknown>;
  outputs: RunOutputs;
}

async function runCode(template: string, code: string, outputs?: string[]): Promise<Ran> {
  const result = await callTool(conn.client, 'run_code', {
    language: template,
    image: imageOf(template),
    code,
    ...(outputs ? { outputs } : {}),
  });
  assert.ok(!result.isError, `tool failed: ${textOf(result)}`);
  const structured = result.structuredContent as Record<string, unknown>;
  assert.equal(structured.phase, 'Succeeded', JSON.stringify(structured));
  assert.equal(structured.backend, 'kubernetes', JSON.stringify(structured));
  const outputsOf = structured.outputs as RunOutputs | undefined;
  assert.ok(outputsOf, `the result says what was returned: ${JSON.stringify(structured)}`);
  return { runId: String(structured.runId), result, structured, outputs: outputsOf };
}

const skipOf = (o: RunOutputs, entry: string) => o.skipped.find((s) => s.entry === entry);

/** Python that writes a file of `bytes` bytes starting with a PNG signature (its media type). */
const png = (name: string, bytes: number) =>
  `open(${JSON.stringify(name)},"wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + b"\\0" * ${bytes - 8})`;

/** What the first test returned, read again after the gateway restarts. */
let plotRun: { runId: string; images: string[]; csvUri: string } | undefined;

describe('output files through the Kubernetes backend (sandpit serve, MCP over Streamable HTTP)', () => {
  before(async () => {
    ensureBuilt();
    suite = await startSuite(await withCluster(), 'outputs-kubernetes', { sandbox: SANDBOX });
    await bindGatewayRbac(suite.cluster, suite.ns);
    served = await serve();
    conn = await connectHttp(`${served.url}/mcp`);
  });
  after(async () => {
    await conn?.close();
    const code = await served?.stop();
    if (code !== 0) failed = true;
    if (failed && served) for (const l of served.logs) process.stderr.write(`# serve: ${l}\n`);
    await stopSuite(suite, failed, (l) => process.stderr.write(`# ${l}\n`));
    assert.equal(code, 0, 'serve exits cleanly on SIGTERM');
  });
  const it = failureMarkingTest(240_000, () => (failed = true));

  it('python-data: a saved plot and an open figure as image content, a CSV as a resource link', async () => {
    const { runId, result, structured, outputs } = await runCode(
      'python-data',
      [
        'import matplotlib.pyplot as plt, pandas as pd',
        'plt.plot([1, 2, 3], [1, 4, 9]); plt.savefig("plot.png")',
        'plt.figure(); plt.bar([1, 2], [2, 1])',
        'pd.DataFrame({"x": [1, 2]}).to_csv("data.csv", index=False)',
        'print("done")',
      ].join('\n'),
      ['*.png', 'data.csv'],
    );
    assert.equal(structured.stdout, 'done\n', 'the files block is not output');
    assert.deepEqual(
      outputs.files.map((f) => [f.path, f.mimeType, f.delivery]),
      [
        ['figure_2.png', 'image/png', 'image'],
        ['plot.png', 'image/png', 'image'],
        ['data.csv', 'text/csv', 'link'],
      ],
    );
    const images = result.content.filter((c) => c.type === 'image');
    assert.equal(images.length, 2);
    for (const image of images) {
      assert.deepEqual([...Buffer.from(image.data, 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    }
    const links = result.content.filter((c) => c.type === 'resource_link');
    assert.deepEqual(
      links.map((l) => [l.uri, l.mimeType]),
      [[`sandpit://runs/${runId}/files/data.csv`, 'text/csv']],
    );
    const csvUri = links[0]!.uri;
    const read = await conn.client.readResource({ uri: csvUri });
    assert.deepEqual(read.contents, [{ uri: csvUri, mimeType: 'text/csv', text: 'x\n1\n2\n' }]);

    // Kept in a ConfigMap the SandboxRun owns (garbage-collected with it), not in the gateway.
    const run = await getRun(suite.cluster, suite.ns, runId);
    assert.deepEqual(run?.status?.outputs, outputs);
    const name = runFilesName(runId, run?.metadata.uid ?? '');
    const map = await suite.cluster.core.readNamespacedConfigMap({ namespace: suite.ns, name });
    assert.equal(map.immutable, true);
    assert.deepEqual(
      map.metadata?.ownerReferences?.map((r) => [r.kind, r.name, r.controller]),
      [['SandboxRun', runId, true]],
    );
    assert.deepEqual(Object.keys(map.binaryData ?? {}).sort(), ['0', '1', '2']);

    const rest = await fetch(`${served.url}/runs/${runId}/files/data.csv`);
    assert.equal(rest.status, 200);
    assert.equal(await rest.text(), 'x\n1\n2\n');
    plotRun = { runId, images: images.map((i) => i.data), csvUri };
  });

  it('caps: the 33rd file, and what goes over a ConfigMap’s 960 KiB, are named with the cap', async () => {
    const many = await runCode('python', 'for i in range(1, 34): open(f"f{i:02}.txt", "w").write(str(i))', [
      '*.txt',
    ]);
    assert.equal(many.outputs.files.length, 32);
    assert.deepEqual(many.outputs.skipped, [
      { entry: 'f33.txt', reason: 'TooManyFiles', message: 'over the cap of 32 files' },
    ]);

    // An image over the inline cap (1 MiB) is also over what one run keeps here: named, not linked.
    const image = await runCode(
      'python',
      [png('big.png', 1024 * KiB + 1), png('small.png', 1000)].join('\n'),
      ['*.png'],
    );
    assert.equal(skipOf(image.outputs, 'big.png')?.reason, 'TooLarge');
    assert.match(skipOf(image.outputs, 'big.png')?.message ?? '', /over the cap of 960 KiB in all/);
    assert.deepEqual(
      image.outputs.files.map((f) => [f.path, f.delivery]),
      [['small.png', 'image']],
    );
    assert.equal(image.result.content.filter((c) => c.type === 'image').length, 1);
    assert.match(textOf(image.result), /big\.png: TooLarge/);

    const total = await runCode(
      'python',
      [
        `open("a.bin", "wb").write(bytes(range(256)) * ${(600 * KiB) / 256})`,
        `open("b.bin", "wb").write(b"b" * ${600 * KiB})`,
        'open("c.bin", "wb").write(b"c\\n")',
      ].join('\n'),
      ['*.bin'],
    );
    assert.deepEqual(
      total.outputs.files.map((f) => [f.path, f.bytes]),
      [
        ['a.bin', 600 * KiB],
        ['c.bin', 2],
      ],
    );
    assert.equal(skipOf(total.outputs, 'b.bin')?.reason, 'TooLarge');
    assert.match(skipOf(total.outputs, 'b.bin')?.message ?? '', /over the cap of 960 KiB in all/);
    assert.ok(total.outputs.bytes <= MAX_RUN_FILES_BYTES);
    const a = await conn.client.readResource({ uri: `sandpit://runs/${total.runId}/files/a.bin` });
    const blob = a.contents[0] && 'blob' in a.contents[0] ? a.contents[0].blob : '';
    assert.equal(Buffer.from(blob, 'base64').length, 600 * KiB);
  });

  it('confinement: `..`, an absolute path and a symlink out of the workspace collect nothing, saying why', async () => {
    const { outputs } = await runCode(
      'python',
      [
        'import os',
        'os.symlink("/etc/passwd", "passwd.png")',
        'os.symlink("/etc", "etc")',
        'open("real.txt", "w").write("inside\\n")',
        'os.symlink("real.txt", "alias.txt")',
      ].join('\n'),
      ['/etc/passwd', '../*', 'passwd.png', 'etc/passwd', 'alias.txt'],
    );
    for (const entry of ['/etc/passwd', '../*', 'passwd.png', 'etc/passwd']) {
      assert.equal(
        skipOf(outputs, entry)?.reason,
        'OutsideWorkspace',
        `${entry}: ${JSON.stringify(outputs)}`,
      );
    }
    assert.match(skipOf(outputs, '/etc/passwd')?.message ?? '', /absolute/);
    assert.match(skipOf(outputs, '../*')?.message ?? '', /'\.\.'/);
    assert.match(
      skipOf(outputs, 'passwd.png')?.message ?? '',
      /leads out of the workspace \(to \/etc\/passwd\)/,
    );
    assert.deepEqual(
      outputs.files.map((f) => f.path),
      ['alias.txt'],
    );
  });

  it('a warm run (a pool pod of its shape) returns its files the same way, over the attach', async () => {
    const policy = createPolicy({
      imageAllowlist: SANDBOX.imageAllowlist,
      allowedRuntimes: [],
      ceilings: { outputBytes: OUTPUT_BYTES, timeoutSeconds: SANDBOX.timeoutSeconds },
    });
    const shape = specWith({ template: 'python', image: imageOf('python'), code: 'pass' }, policy);
    await createPool(suite.cluster, suite.ns, 'outputs', poolSpecFor(shape, { replicas: 1 }));
    await waitPoolReady(suite.cluster, suite.ns, 'outputs', 1, 120_000);
    const { runId, result, structured, outputs } = await runCode(
      'python',
      `${WRITE_PNG('plot.png')}\nopen("data.csv", "w").write("x\\n1\\n")\nprint("warm")`,
      ['plot.png', 'data.csv', 'missing.txt'],
    );
    await deletePool(suite.cluster, suite.ns, 'outputs');
    assert.equal(structured.served, 'warm', `served by a pool pod: ${JSON.stringify(structured)}`);
    assert.equal(structured.stdout, 'warm\n', 'neither the files block nor the trailer is output');
    assert.deepEqual(
      outputs.files.map((f) => [f.path, f.delivery]),
      [
        ['plot.png', 'image'],
        ['data.csv', 'link'],
      ],
    );
    assert.equal(skipOf(outputs, 'missing.txt')?.reason, 'NoMatch', JSON.stringify(outputs));
    assert.equal(result.content.filter((c) => c.type === 'image').length, 1, 'one image content');
    const uri = `sandpit://runs/${runId}/files/data.csv`;
    const read = await conn.client.readResource({ uri });
    assert.deepEqual(read.contents, [{ uri, mimeType: 'text/csv', text: 'x\n1\n' }]);
  });

  it('a restarted gateway serves the files from the ConfigMap: resources/read, REST, get_run', async () => {
    assert.ok(plotRun, 'the first test ran');
    await conn.close();
    assert.equal(await served.stop(), 0);
    served = await serve();
    conn = await connectHttp(`${served.url}/mcp`);

    const csv = await conn.client.readResource({ uri: plotRun.csvUri });
    assert.deepEqual(csv.contents, [{ uri: plotRun.csvUri, mimeType: 'text/csv', text: 'x\n1\n2\n' }]);
    const plotUri = `sandpit://runs/${plotRun.runId}/files/plot.png`;
    const plot = await conn.client.readResource({ uri: plotUri });
    const blob = plot.contents[0] && 'blob' in plot.contents[0] ? plot.contents[0].blob : '';
    assert.ok(plotRun.images.includes(blob), 'the same bytes as the image content');
    const tar = await fetch(`${served.url}/runs/${plotRun.runId}/artifacts`);
    assert.equal(tar.status, 200);
    assert.ok((await tar.arrayBuffer()).byteLength > 0);

    const again = await callTool(conn.client, 'get_run', { runId: plotRun.runId });
    assert.equal(again.content.filter((c) => c.type === 'image').length, 2);
  });
});
