/** Output files in a pod log: the block the runner writes, taken apart again, never trusted. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  encodeFilesBlock,
  FILES_BLOCK_START,
  FilesBlockFilter,
  maxFilesBlockBytes,
  parseFilesBlock,
} from '../../../src/runner/files-block.js';
import type { ReturnedOutputs } from '../../../src/runner/output-files.js';

const CAPS = { maxFiles: 32, maxBytes: 1024 * 1024 };
const OUTPUTS: ReturnedOutputs = {
  files: [
    { path: 'plot.png', data: Buffer.from([0x89, 0x50, 0x4e, 0x47, ...Array<number>(300).fill(7)]) },
    { path: 'empty.txt', data: Buffer.alloc(0) },
    { path: 'dir/é.csv', data: Buffer.from('a,b\n') },
  ],
  skipped: [{ entry: '/etc/passwd', reason: 'OutsideWorkspace', message: 'an absolute path' }],
};

/** The block's bytes after its start line, as the filter hands them on. */
function afterStart(log: Buffer): Buffer {
  const filter = new FilesBlockFilter();
  filter.push(log);
  return filter.blockBytesSeen()!;
}

describe('the files block', () => {
  test('round trip: files (base64 in lines of 76), an empty one, a skip', () => {
    const block = encodeFilesBlock(OUTPUTS);
    assert.ok(block.subarray(0, FILES_BLOCK_START.length).equals(FILES_BLOCK_START));
    assert.ok(
      block
        .toString('latin1')
        .split('\n')
        .every((l) => l.length <= 76 || l.startsWith('\x1e')),
    );
    assert.deepEqual(parseFilesBlock(afterStart(block), CAPS), OUTPUTS);
  });

  test('the output before it is given back byte for byte, however the stream is cut', () => {
    const output = Buffer.from('line 1\nno newline at the end');
    const log = Buffer.concat([
      output,
      encodeFilesBlock(OUTPUTS),
      Buffer.from('\n\x1esandpit-exit trailer\n'),
    ]);
    for (const size of [1, 3, 7, 64, log.length]) {
      const filter = new FilesBlockFilter();
      const shown: Buffer[] = [];
      for (let i = 0; i < log.length; i += size) shown.push(filter.push(log.subarray(i, i + size)));
      shown.push(filter.end());
      assert.deepEqual(Buffer.concat(shown), output, `chunks of ${size}`);
      const parsed = parseFilesBlock(filter.blockBytesSeen()!, CAPS);
      assert.deepEqual(parsed.files, OUTPUTS.files);
    }
    const plain = new FilesBlockFilter();
    assert.deepEqual(
      Buffer.concat([plain.push(Buffer.from('no block\n')), plain.end()]),
      Buffer.from('no block\n'),
    );
    assert.equal(plain.blockBytesSeen(), undefined);
  });

  test('a block the program printed first is passed over: the last one is the runner’s', () => {
    const fake = encodeFilesBlock({ files: [{ path: 'fake', data: Buffer.from('x') }], skipped: [] });
    const log = Buffer.concat([Buffer.from('out'), fake, Buffer.from('more'), encodeFilesBlock(OUTPUTS)]);
    assert.deepEqual(parseFilesBlock(afterStart(log), CAPS), OUTPUTS);
  });

  test('never trusted: the caps, the format and the paths are checked', () => {
    const one = { maxFiles: 1, maxBytes: 10 };
    assert.throws(
      () => parseFilesBlock(afterStart(encodeFilesBlock(OUTPUTS)), one),
      /more files|more file bytes/,
    );
    const bad = (text: string) => () => parseFilesBlock(Buffer.from(text, 'latin1'), CAPS);
    assert.throws(bad('\x1eF 3 cGF0aA==\n!!!!\n\x1esandpit-files-end\n'), /base64/);
    assert.throws(bad('\x1eF x cGF0aA==\n\x1esandpit-files-end\n'), /bad size/);
    assert.throws(bad('\x1eS 99 eA== eQ==\n\x1esandpit-files-end\n'), /unknown reason/);
    assert.throws(bad('garbage\n'), /not the runner/);
    assert.throws(bad('\x1eF 3 cGF0aA==\n'), /ends early/);
    const evil = parseFilesBlock(
      afterStart(encodeFilesBlock({ files: [{ path: '../x', data: Buffer.from('z') }], skipped: [] })),
      CAPS,
    );
    assert.deepEqual(evil.files, []);
    assert.equal(evil.skipped[0]?.reason, 'NameNotAllowed');
  });

  test('a block longer than its bound is cut and said to be; the bound fits the cap', () => {
    const filter = new FilesBlockFilter(10);
    filter.push(encodeFilesBlock(OUTPUTS));
    assert.equal(filter.overflowed, true);
    const big = { files: [{ path: 'big', data: Buffer.alloc(CAPS.maxBytes, 1) }], skipped: [] };
    assert.ok(encodeFilesBlock(big).length <= maxFilesBlockBytes(CAPS.maxBytes));
  });
});
