import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createPolicy, DEFAULT_CEILINGS, defaultImageAllowlist } from '../../../src/policy/policy.js';
import { BUILTIN_TEMPLATES } from '../../../src/policy/templates.js';

test('createPolicy() defaults: built-in templates, their images + python:3.11, default ceilings, runc/runsc, no egress', () => {
  const p = createPolicy();
  assert.equal(p.templates, BUILTIN_TEMPLATES);
  assert.deepEqual(p.imageAllowlist, [
    'sandpit/python:3.11',
    'sandpit/python-data:3.11',
    'sandpit/node:18',
    'sandpit/bash:5',
    'sandpit/c:12',
    'sandpit/rust:1',
    'python:3.11',
  ]);
  assert.deepEqual(p.ceilings, DEFAULT_CEILINGS);
  assert.equal(p.defaultRuntime, undefined);
  assert.deepEqual(p.allowedRuntimes, ['runc', 'runsc']);
});

test('partial ceilings override only what they name', () => {
  const p = createPolicy({ ceilings: { cpuMilli: 250, files: 3 } });
  assert.deepEqual(p.ceilings, { ...DEFAULT_CEILINGS, cpuMilli: 250, files: 3 });
  // the shared defaults are not modified
  assert.equal(DEFAULT_CEILINGS.cpuMilli, 1000);
});

test('a default runtime alone is the allowed list; an explicit list wins', () => {
  assert.deepEqual(createPolicy({ defaultRuntime: 'runsc' }).allowedRuntimes, ['runsc']);
  assert.deepEqual(
    createPolicy({ defaultRuntime: 'runsc', allowedRuntimes: ['runc', 'runsc'] }).allowedRuntimes,
    ['runc', 'runsc'],
  );
});

test('an explicit allowlist replaces the default one, even when empty', () => {
  assert.deepEqual(createPolicy({ imageAllowlist: ['x:1'] }).imageAllowlist, ['x:1']);
  assert.deepEqual(createPolicy({ imageAllowlist: [] }).imageAllowlist, []);
});

test('defaultImageAllowlist de-duplicates', () => {
  const t = BUILTIN_TEMPLATES[0]!;
  assert.deepEqual(defaultImageAllowlist([t, { ...t, name: 'py2', image: 'python:3.11' }]), [
    'sandpit/python:3.11',
    'python:3.11',
  ]);
});
