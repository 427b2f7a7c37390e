// The chart's own files: the CRD is a copy of crds/ (drift check), the versions follow package.json,
// and values.schema.json refuses bad values with a message naming the field.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { CHART, helm, render, ROOT, templateArgs } from './helm.js';

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  files: string[];
};

describe('charts/sandpit files', () => {
  test('crds/ holds exactly a byte-for-byte copy of the repository crds/', () => {
    const want = readdirSync(path.join(ROOT, 'crds')).sort();
    assert.deepEqual(readdirSync(path.join(CHART, 'crds')).sort(), want);
    for (const f of want) {
      assert.equal(
        readFileSync(path.join(CHART, 'crds', f), 'utf8'),
        readFileSync(path.join(ROOT, 'crds', f), 'utf8'),
        `charts/sandpit/crds/${f} differs from crds/${f}: run \`npm run gen:crd\`, which writes both`,
      );
    }
  });

  test('Chart.yaml: apiVersion v2, version and appVersion = package.json version, kubeVersion >= 1.20', () => {
    const chart = parse(readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as Record<string, unknown>;
    assert.equal(chart.apiVersion, 'v2');
    assert.equal(chart.name, 'sandpit');
    assert.equal(chart.version, pkg.version);
    assert.equal(chart.appVersion, pkg.version);
    assert.equal(chart.kubeVersion, '>=1.20.0-0');
    assert.equal(chart.dependencies, undefined, 'no dependencies: rendering needs no network');
  });

  test('deploy/operator.yaml runs the image the chart defaults to', () => {
    const manifest = readFileSync(path.join(ROOT, 'deploy/operator.yaml'), 'utf8');
    assert.match(manifest, new RegExp(`image: sandpit/sandpit:${pkg.version.replace(/\./g, '\\.')}\\n`));
  });

  test('the npm package ships the chart', () => {
    assert.ok(pkg.files.includes('charts/'), 'package.json files lists charts/');
  });

  const rejects: [string, string[], RegExp][] = [
    [
      'operator.replicas 0',
      ['--set', 'operator.replicas=0'],
      /\/operator\/replicas': minimum: got 0, want 1/,
    ],
    [
      'operator.replicas text',
      ['--set', 'operator.replicas=two'],
      /\/operator\/replicas': got string, want integer/,
    ],
    ['an unknown top-level key', ['--set', 'replicas=2'], /additional properties 'replicas' not allowed/],
    [
      'a typo in a section',
      ['--set', 'gateway.servce.port=80'],
      /additional properties 'servce' not allowed/,
    ],
    [
      'a service type',
      ['--set', 'gateway.service.type=Ingress'],
      /\/gateway\/service\/type': value must be one of/,
    ],
    ['a port', ['--set', 'gateway.port=70000'], /\/gateway\/port': maximum: got 70,000, want 65,535/],
    [
      'a short token, saying how long it must be',
      ['--set', 'gateway.auth.token=short'],
      /gateway\.auth\.token: expected at least 8 characters, got 5/,
    ],
    ['a pull policy', ['--set', 'image.pullPolicy=Sometimes'], /\/image\/pullPolicy': value must be one of/],
    [
      'a namespace name',
      ['--set-json', 'operator.watchNamespaces=["Team_A"]'],
      /\/operator\/watchNamespaces\/0'/,
    ],
    ['a CPU quantity', ['--set', 'sandbox.maxCpu=lots'], /\/sandbox\/maxCpu': 'lots' does not match pattern/],
    [
      'a memory quantity',
      ['--set', 'sandbox.maxMemory=big'],
      /\/sandbox\/maxMemory': 'big' does not match pattern/,
    ],
    ['a RuntimeClass name', ['--set', 'sandbox.runtimeClassName=GVisor'], /\/sandbox\/runtimeClassName'/],
    [
      'a pending timeout',
      ['--set', 'sandbox.pendingTimeoutSeconds=0'],
      /\/sandbox\/pendingTimeoutSeconds': minimum/,
    ],
    ['a log level', ['--set', 'operator.logLevel=loud'], /\/operator\/logLevel': value must be one of/],
    ['hostNetwork text', ['--set', 'hostNetwork=yes'], /\/hostNetwork': got string, want boolean/],
    ['a scrape interval', ['--set', 'serviceMonitor.interval=often'], /\/serviceMonitor\/interval'/],
  ];
  for (const [what, flags, message] of rejects) {
    test(`values.schema.json refuses ${what}`, async () => {
      const res = await helm(templateArgs({ flags }));
      assert.notEqual(res.code, 0, `helm template accepted ${flags.join(' ')}`);
      assert.match(res.stderr, message);
    });
  }

  test('values.schema.json accepts the documented forms', async () => {
    await render({
      values: {
        'sandbox.maxCpu': 2,
        'sandbox.maxMemory': '1Gi',
        apiServer: { host: 'kubernetes.example', port: '6443' },
        'gateway.service.nodePort': null,
        'operator.extraConfig': { kubernetes: { operator: { workers: 8 } } },
      },
    });
    await render({
      values: { 'sandbox.maxCpu': '250m', 'apiServer.port': 6443, 'apiServer.host': '127.0.0.1' },
    });
  });
});
