// The chart's warm pools: values.pools rendered as SandboxPool objects that the CRD's own schema
// (generated from zod) accepts, one per entry in its namespace, or, without one, in the gateway's
// run namespace and every tenant's; bad entries refused with a reason.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SandboxPoolSchema } from '../../../src/api/v1alpha1/sandboxpool.js';
import { CHART, helm, render, type K8sObject } from './helm.js';

const NS = 'sandpit-system';
const pools = (docs: K8sObject[]) => docs.filter((d) => d.kind === 'SandboxPool');

describe('charts/sandpit pools', { concurrency: true }, () => {
  test('none by default', async () => {
    assert.deepEqual(pools(await render({ namespace: NS })), []);
  });

  test('each entry a SandboxPool with only the fields set; without a namespace, in every namespace the gateway serves', async () => {
    const docs = await render({
      namespace: NS,
      values: {
        'tenants.namespaces': [{ name: 'team-a' }, { name: 'team-b' }],
        pools: [
          { name: 'python', template: 'python', replicas: 4 },
          {
            name: 'bash-gvisor',
            namespace: 'team-a',
            template: 'bash',
            resources: { cpu: '500m', memory: '256Mi' },
            runtimeClassName: 'gvisor',
            mode: 'session',
            replicas: 2,
            maxIdleSeconds: 600,
          },
        ],
      },
    });
    const rendered = pools(docs);
    assert.deepEqual(rendered.map((p) => `${p.metadata.namespace}/${p.metadata.name}`).sort(), [
      `${NS}/python`,
      'team-a/bash-gvisor',
      'team-a/python',
      'team-b/python',
    ]);
    for (const p of rendered) {
      const parsed = SandboxPoolSchema.safeParse(p);
      assert.ok(parsed.success, `${p.metadata.name}: ${parsed.error?.message}`);
      assert.equal(p.metadata.labels?.['app.kubernetes.io/component'], 'pool');
      assert.equal(p.metadata.labels?.['app.kubernetes.io/instance'], 'sandpit');
    }
    const python = rendered.find((p) => p.metadata.namespace === 'team-b')!;
    assert.deepEqual(python.spec, { template: 'python', replicas: 4 });
    const gvisor = rendered.find((p) => p.metadata.name === 'bash-gvisor')!;
    assert.deepEqual(gvisor.spec, {
      template: 'bash',
      resources: { cpu: '500m', memory: '256Mi' },
      runtimeClassName: 'gvisor',
      mode: 'session',
      replicas: 2,
      maxIdleSeconds: 600,
    });
  });

  test('refused with a reason: no template or image, a bad field, twice in one namespace, a namespace the operator does not watch', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ pools: [{ name: 'p' }] }, /\/pools\/0'/],
      [{ pools: [{ name: 'p', template: 'python', replicas: -1 }] }, /\/pools\/0\/replicas'/],
      [{ pools: [{ name: 'p', template: 'python', maxIdleSeconds: 5 }] }, /\/pools\/0\/maxIdleSeconds'/],
      [{ pools: [{ name: 'p', template: 'python', mode: 'batch' }] }, /\/pools\/0\/mode'/],
      [{ pools: [{ name: 'p', template: 'python', size: 3 }] }, /additional properties 'size' not allowed/],
      [{ pools: [{ name: 'P_1', template: 'python' }] }, /\/pools\/0\/name'/],
      [
        {
          pools: [
            { name: 'p', template: 'python' },
            { name: 'p', template: 'bash', namespace: NS },
          ],
        },
        /pools: "p" is listed twice for namespace "sandpit-system"/,
      ],
      [
        {
          'operator.watchNamespaces': [NS],
          pools: [{ name: 'p', template: 'python', namespace: 'elsewhere' }],
        },
        /pools: "p" is in namespace "elsewhere", which the operator does not watch/,
      ],
    ];
    for (const [values, want] of cases) {
      const flags = Object.entries(values).flatMap(([k, v]) => ['--set-json', `${k}=${JSON.stringify(v)}`]);
      const res = await helm(['template', 'sandpit', CHART, '--namespace', NS, ...flags]);
      assert.notEqual(res.code, 0, flags.join(' '));
      assert.match(res.stderr, want);
    }
    // A tenant's namespace is watched with the listed ones.
    const ok = await render({
      namespace: NS,
      values: {
        'operator.watchNamespaces': [NS],
        'tenants.namespaces': [{ name: 'team-a' }],
        pools: [{ name: 'p', image: 'sandpit/python:3.11', namespace: 'team-a' }],
      },
    });
    assert.equal(pools(ok).length, 1);
  });
});
