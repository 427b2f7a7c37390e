import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { imageTypeOf, mediaTypeOf } from '../../../src/api/media.js';
import {
  buildRunOutputs,
  DEFAULT_OUTPUT_CAPS,
  refusedEntry,
  RunOutputsSchema,
  type CollectedFile,
} from '../../../src/api/outputs.js';
import { RunRequestSchema } from '../../../src/api/run.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { evaluate, resolveOutputs, type EffectiveSpec } from '../../../src/policy/evaluate.js';

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0]);
const GIF = Buffer.from('GIF89a');
const SVG = Buffer.from('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="1"></svg>');
const MiB = 1024 ** 2;

const file = (path: string, head: Buffer, bytes = head.length): CollectedFile => ({ path, head, bytes });

function spec(input: Record<string, unknown>): EffectiveSpec {
  const r = evaluate(RunRequestSchema.parse(input), createPolicy());
  assert.ok(r.ok, JSON.stringify(r));
  return r.spec;
}

describe('outputs in a run request', () => {
  test('paths and globs are taken; at most 32 entries, none empty, long or with control characters', () => {
    const base = { template: 'python', code: '' };
    assert.ok(
      RunRequestSchema.safeParse({ ...base, outputs: ['plot.png', 'out/**/*.csv', '[ab].txt'] }).success,
    );
    assert.ok(RunRequestSchema.safeParse({ ...base, outputs: [] }).success);
    for (const outputs of [[''], ['a\nb'], ['a\u0000'], ['x'.repeat(1025)], Array(33).fill('a')]) {
      assert.equal(RunRequestSchema.safeParse({ ...base, outputs }).success, false, JSON.stringify(outputs));
    }
  });

  test('absolute paths and `..` are refused, each named with why; the rest is sent, each once', () => {
    assert.deepEqual(refusedEntry('/etc/passwd'), {
      entry: '/etc/passwd',
      reason: 'OutsideWorkspace',
      message: 'an absolute path: give it relative to the workspace',
    });
    assert.equal(refusedEntry('a/../../b')?.reason, 'OutsideWorkspace');
    assert.equal(refusedEntry('../*.png')?.reason, 'OutsideWorkspace');
    assert.equal(refusedEntry('a..b/c..'), undefined);
    assert.equal(refusedEntry('**/*.png'), undefined);
    const resolved = resolveOutputs(['a.png', '/x', 'a.png', '../y', 'b/*.csv'], DEFAULT_OUTPUT_CAPS);
    assert.deepEqual(resolved.entries, ['a.png', 'b/*.csv']);
    assert.deepEqual(
      resolved.refused.map((s) => s.entry),
      ['/x', '../y'],
    );
  });

  test('a template collects nothing unless asked; an empty list collects nothing; the caps come from policy', () => {
    const plain = spec({ template: 'python', code: '' });
    assert.deepEqual(plain.outputs.entries, []);
    assert.deepEqual(plain.outputs.caps, DEFAULT_OUTPUT_CAPS);
    assert.deepEqual(spec({ template: 'python', code: '', outputs: ['r.csv'] }).outputs.entries, ['r.csv']);
    assert.deepEqual(DEFAULT_OUTPUT_CAPS, {
      maxFiles: 32,
      maxBytes: 16 * MiB,
      inlineImageBytes: MiB,
      inlineImages: 4,
    });
  });
});

describe('media types', () => {
  test('images by their bytes; SVG by its name and an <svg> element; others by extension', () => {
    assert.equal(imageTypeOf('p.png', PNG), 'image/png');
    assert.equal(imageTypeOf('renamed.dat', PNG), 'image/png');
    assert.equal(imageTypeOf('a.jpg', JPEG), 'image/jpeg');
    assert.equal(imageTypeOf('a.gif', GIF), 'image/gif');
    assert.equal(imageTypeOf('a.svg', SVG), 'image/svg+xml');
    assert.equal(imageTypeOf('a.txt', SVG), undefined, 'an SVG needs its name too');
    assert.equal(imageTypeOf('fake.png', Buffer.from('not a png')), undefined);
    assert.equal(mediaTypeOf('fake.png', Buffer.from('not a png')), 'application/octet-stream');
    assert.equal(mediaTypeOf('r.CSV', Buffer.from('a,b')), 'text/csv');
    assert.equal(mediaTypeOf('noext', Buffer.from('x')), 'application/octet-stream');
  });
});

describe('what a result says of its outputs', () => {
  test('the first 4 images up to 1 MiB inline; a larger one and a fifth are links, each saying why', () => {
    const outputs = buildRunOutputs(
      [
        file('big.png', PNG, MiB + 1),
        file('a.png', PNG, 100),
        file('b.jpg', JPEG, 100),
        file('c.gif', GIF, 100),
        file('d.svg', SVG),
        file('e.png', PNG, MiB),
        file('data.csv', Buffer.from('a,b\n1,2\n')),
      ],
      [{ entry: 'missing.txt', reason: 'NoMatch', message: 'nothing matches it' }],
      DEFAULT_OUTPUT_CAPS,
    );
    assert.deepEqual(
      outputs.files.map((f) => [f.path, f.mimeType, f.delivery]),
      [
        ['big.png', 'image/png', 'link'],
        ['a.png', 'image/png', 'image'],
        ['b.jpg', 'image/jpeg', 'image'],
        ['c.gif', 'image/gif', 'image'],
        ['d.svg', 'image/svg+xml', 'image'],
        ['e.png', 'image/png', 'link'],
        ['data.csv', 'text/csv', 'link'],
      ],
    );
    assert.match(outputs.files[0]!.note ?? '', /over the 1 MiB cap on an inline image/);
    assert.match(outputs.files[5]!.note ?? '', /4 images inline at most/);
    assert.equal(outputs.files[6]!.note, undefined);
    assert.equal(outputs.bytes, MiB + 1 + 300 + SVG.length + MiB + 8);
    assert.deepEqual(outputs.skipped, [
      { entry: 'missing.txt', reason: 'NoMatch', message: 'nothing matches it' },
    ]);
    assert.ok(RunOutputsSchema.safeParse(outputs).success);
  });
});
