import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { imageAllowed, normaliseImage, parseImageRef } from '../../../src/policy/images.js';

const D = `sha256:${'0123456789abcdef'.repeat(4)}`;

describe('normaliseImage', () => {
  const cases: [string, string | undefined][] = [
    ['python', 'python:latest'],
    ['python:3.11', 'python:3.11'],
    ['library/python:3.11', 'python:3.11'],
    ['docker.io/library/python:3.11', 'python:3.11'],
    ['docker.io/library/python', 'python:latest'],
    ['docker.io/sandpit/python:3.11', 'sandpit/python:3.11'],
    ['sandpit/python:3.11', 'sandpit/python:3.11'],
    ['library/team/app:1', 'library/team/app:1'],
    ['ghcr.io/org/app:v1.2.3', 'ghcr.io/org/app:v1.2.3'],
    ['localhost:5000/app', 'localhost:5000/app:latest'],
    ['registry.local:5000/team/app:1', 'registry.local:5000/team/app:1'],
    ['my-app_x.y:tag_1.0-rc', 'my-app_x.y:tag_1.0-rc'],
    [`python@${D}`, `python@${D}`],
    [`python:3.11@${D}`, `python:3.11@${D}`],
    [`docker.io/library/python:3.11@${D}`, `python:3.11@${D}`],
    // malformed
    ['', undefined],
    ['Python', undefined],
    ['python:', undefined],
    ['python::3', undefined],
    [':3.11', undefined],
    ['/python', undefined],
    ['python/', undefined],
    ['a//b', undefined],
    ['py thon', undefined],
    ['python:3.11 ', undefined],
    ['python@sha256:abc', undefined],
    [`python@sha512:${'a'.repeat(128)}`, undefined],
    ['python:-bad', undefined],
    [`python:${'t'.repeat(129)}`, undefined],
    ['a'.repeat(256), undefined],
    ['python:3.11;rm -rf /', undefined],
    ['../etc/passwd', undefined],
  ];
  for (const [ref, want] of cases) {
    test(`${JSON.stringify(ref.length > 40 ? `${ref.slice(0, 40)}…` : ref)} → ${want ?? 'invalid'}`, () => {
      assert.equal(normaliseImage(ref), want);
    });
  }

  test('a 128-character tag is the longest allowed', () => {
    assert.equal(normaliseImage(`python:${'t'.repeat(128)}`), `python:${'t'.repeat(128)}`);
  });
});

describe('parseImageRef', () => {
  test('splits name, tag and digest', () => {
    assert.deepEqual(parseImageRef(`docker.io/library/python:3.11@${D}`), {
      name: 'python',
      tag: '3.11',
      digest: D,
    });
    assert.deepEqual(parseImageRef('sandpit/bash'), { name: 'sandpit/bash' });
    assert.deepEqual(parseImageRef('localhost:5000/x:y'), { name: 'localhost:5000/x', tag: 'y' });
    assert.equal(parseImageRef('NOPE'), undefined);
  });
});

describe('imageAllowed', () => {
  const cases: [string, string[], boolean][] = [
    ['python:3.11', ['python:3.11'], true],
    ['docker.io/library/python:3.11', ['python:3.11'], true],
    ['python:3.11', ['docker.io/library/python:3.11'], true],
    ['python', ['python'], true],
    ['python:latest', ['python'], true],
    ['python', ['python:3.11'], false],
    ['python:3.11', ['python'], false],
    ['python:3.11', [], false],
    ['python:3.11', ['node:18', 'python:3.11'], true],
    ['sandpit/python:3.11', ['sandpit/*'], true],
    ['sandpit/deep/name:1', ['sandpit/*'], true],
    ['sandpit:1', ['sandpit/*'], false],
    ['sandpitevil/x:1', ['sandpit/*'], false],
    ['other/sandpit/x:1', ['sandpit/*'], false],
    [`sandpit/python@${D}`, ['sandpit/*'], true],
    [`python@${D}`, [`python@${D}`], true],
    [`python@${D}`, ['python:3.11'], false],
    [`python:3.11@${D}`, ['python:3.11'], false],
    ['python:3.11', [`python:3.11@${D}`], false],
    ['Python:3.11', ['*'], false],
    ['python:3.11', ['*'], true],
    ['python:3.11', ['not a ref'], false],
  ];
  for (const [ref, list, want] of cases) {
    test(`${ref} in [${list.join(', ')}] → ${want}`, () => {
      assert.equal(imageAllowed(ref, list), want);
    });
  }
});
