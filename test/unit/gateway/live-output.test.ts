import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LiveOutput } from '../../../src/gateway/live-output.js';

test('each stream is decoded and collected separately', () => {
  const live = new LiveOutput();
  const chunks = [
    live.add({ stream: 'stdout', data: Buffer.from('he') }),
    live.add({ stream: 'stderr', data: Buffer.from('warn') }),
    live.add({ stream: 'stdout', data: Buffer.from('llo') }),
  ];
  assert.deepEqual(
    chunks.map((c) => [c.stream, c.text, c.data.toString()]),
    [
      ['stdout', 'he', 'he'],
      ['stderr', 'warn', 'warn'],
      ['stdout', 'llo', 'llo'],
    ],
  );
  assert.deepEqual(live.text, { stdout: 'hello', stderr: 'warn' });
  assert.deepEqual(live.end(), []);
});

test('a character split across chunks is decoded once it is whole; a cut-off one comes out at the end', () => {
  const live = new LiveOutput();
  const euro = Buffer.from('€');
  assert.equal(live.add({ stream: 'stdout', data: euro.subarray(0, 1) }).text, '');
  assert.equal(live.add({ stream: 'stdout', data: euro.subarray(1) }).text, '€');
  assert.equal(live.add({ stream: 'stderr', data: euro.subarray(0, 2) }).text, '');
  const rest = live.end();
  assert.deepEqual(
    rest.map((c) => [c.stream, c.text, c.data.length]),
    [['stderr', '\uFFFD', 0]],
  );
  assert.deepEqual(live.text, { stdout: '€', stderr: '\uFFFD' });
});
