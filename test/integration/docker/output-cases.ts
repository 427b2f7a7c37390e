/**
 * Output files on a real sandbox (issue 18): collected in-band by the runner once the program
 * has exited, kept by the backend, and named with why when not collected: confinement (absolute
 * paths, `..`, symlinks that leave the workspace) and the caps (32 files, 16 MiB in all, 1 MiB per
 * inline image). One suite, run against the Docker backend (outputs.test.ts: cold, or warm with
 * SANDPIT_TEST_POOL=on) and the oci backend (test/integration/oci/outputs.test.ts).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { RunRequestInput, RunResult } from '../../../src/api/run.js';
import type { RunFiles, SandboxBackend } from '../../../src/backends/types.js';
import { runId, spec, testTemplates } from '../../support/docker.js';

const MiB = 1024 ** 2;
const OWNER = { id: 'tester' };

const skipOf = (r: RunResult, entry: string) => r.outputs?.skipped.find((s) => s.entry === entry);

/** A PNG of `bytes` bytes: its signature, then filler (the media type is read from the signature). */
const png = (name: string, bytes: number) =>
  `open(${JSON.stringify(name)},"wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + b"\\0" * ${bytes - 8})`;

/** A backend of one machine: it keeps its runs' files. */
type KeepingBackend = SandboxBackend & { readonly files: RunFiles };

export function outputCases(make: () => Promise<KeepingBackend>, served: 'cold' | 'warm' = 'cold'): void {
  let backend: KeepingBackend;
  before(async () => {
    backend = await make();
  });
  after(() => backend.close());

  async function run(request: RunRequestInput): Promise<{ result: RunResult; id: string }> {
    const id = runId('out');
    const execution = backend.start(spec(request, { templates: testTemplates() }), {
      runId: id,
      owner: OWNER.id,
    });
    const result = await execution.result;
    await execution.cleanedUp;
    return { result, id };
  }
  describe('collecting', () => {
    test('paths and globs collect files with their bytes; images are shown inline, others linked', async () => {
      const { result, id } = await run({
        template: 'python',
        code: [
          'import os',
          png('plot.png', 100_000),
          'open("data.csv","w").write("a,b\\n1,2\\n")',
          'os.makedirs("out/deep", exist_ok=True)',
          'open("out/deep/r.json","w").write("{}")',
          'open("out/x.txt","w").write("x")',
          'open(".hidden.txt","w").write("h")',
        ].join('\n'),
        outputs: ['plot.png', '*.csv', 'out/**/*.json', 'out/*.txt'],
      });
      assert.equal(result.phase, 'Succeeded', result.stderr);
      assert.equal(result.served, served, 'a warm container collects in-band too');
      assert.deepEqual(
        result.outputs?.files.map((f) => [f.path, f.bytes, f.mimeType, f.delivery]),
        [
          ['plot.png', 100_000, 'image/png', 'image'],
          ['data.csv', 8, 'text/csv', 'link'],
          ['out/deep/r.json', 2, 'application/json', 'link'],
          ['out/x.txt', 1, 'text/plain', 'link'],
        ],
      );
      assert.deepEqual(result.outputs?.skipped, []);
      const plot = await backend.files.read(id, 'plot.png', OWNER);
      assert.equal(plot.length, 100_000);
      assert.deepEqual([...plot.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
      assert.equal((await backend.files.read(id, 'data.csv', OWNER)).toString(), 'a,b\n1,2\n');
      await assert.rejects(backend.files.read(id, 'data.csv', { id: 'someone-else' }), { code: 'NOT_FOUND' });
      await assert.rejects(backend.files.read(id, '.hidden.txt', OWNER), { code: 'NOT_FOUND' });
    });

    test('a failed program still returns its files; without outputs nothing is collected or said', async () => {
      const failed = await run({
        template: 'bash',
        code: 'echo partial > part.txt; exit 3',
        outputs: ['part.txt', 'missing.txt'],
      });
      assert.equal(failed.result.exitCode, 3);
      assert.deepEqual(
        failed.result.outputs?.files.map((f) => f.path),
        ['part.txt'],
      );
      assert.equal(skipOf(failed.result, 'missing.txt')?.reason, 'NoMatch');
      const none = await run({ template: 'bash', code: 'echo x > a.png' });
      assert.equal(none.result.outputs, undefined);
    });
  });

  describe('confinement: an entry that leaves the workspace collects nothing and says why', () => {
    test('an absolute path, `..`, a symlink out (file and directory), and one that stays in', async () => {
      const { result, id } = await run({
        template: 'bash',
        code: [
          'ln -s /etc/passwd passwd.png',
          'ln -s /etc etc',
          'ln -s ../tmp up',
          'echo secret > /tmp/s.txt',
          'echo inside > real.txt',
          'ln -s real.txt alias.txt',
          'mkdir d && ln -s /etc/hostname d/host.txt',
        ].join('; '),
        outputs: ['/etc/passwd', '../*', 'passwd.png', 'etc/passwd', 'up/s.txt', 'alias.txt', 'd/*.txt'],
      });
      assert.equal(result.phase, 'Succeeded', result.stderr);
      for (const entry of ['/etc/passwd', '../*', 'passwd.png', 'etc/passwd', 'up/s.txt', 'd/host.txt']) {
        assert.equal(
          skipOf(result, entry)?.reason,
          'OutsideWorkspace',
          `${entry}: ${JSON.stringify(result.outputs)}`,
        );
      }
      assert.match(
        skipOf(result, 'passwd.png')?.message ?? '',
        /leads out of the workspace \(to \/etc\/passwd\)/,
      );
      assert.match(skipOf(result, '/etc/passwd')?.message ?? '', /absolute/);
      assert.match(skipOf(result, '../*')?.message ?? '', /'\.\.'/);
      assert.equal(skipOf(result, 'd/*.txt'), undefined, 'the glob matched the symlink, named above');
      assert.deepEqual(
        result.outputs?.files.map((f) => f.path),
        ['alias.txt'],
      );
      assert.equal((await backend.files.read(id, 'alias.txt', OWNER)).toString(), 'inside\n');
    });

    test('a directory, a FIFO and a name that cannot be returned are named, not read', async () => {
      const { result } = await run({
        template: 'bash',
        code: String.raw`mkdir adir; mkfifo pipe; touch 'bad\name' 'nl` + '\n' + "x'",
        outputs: ['adir', 'pipe', 'bad*', 'nl*'],
      });
      assert.equal(skipOf(result, 'adir')?.reason, 'NotAFile');
      assert.equal(skipOf(result, 'pipe')?.reason, 'NotAFile');
      assert.equal(
        skipOf(result, String.raw`bad\name`)?.reason,
        'NameNotAllowed',
        JSON.stringify(result.outputs),
      );
      assert.equal(skipOf(result, 'nl\uFFFDx')?.reason, 'NameNotAllowed', 'a newline is shown replaced');
      assert.equal(skipOf(result, 'bad*'), undefined, 'the entry matched: it is not "no match"');
      assert.equal(result.outputs?.skipped.length, 4);
    });
  });

  describe('caps: what goes over one is named, never dropped silently', () => {
    test('33 files: 32 collected, the 33rd named with the cap', async () => {
      const { result } = await run({
        template: 'bash',
        code: 'for i in $(seq -w 1 33); do echo $i > f$i.txt; done',
        outputs: ['*.txt'],
      });
      assert.equal(result.outputs?.files.length, 32);
      assert.deepEqual(result.outputs?.skipped, [
        { entry: 'f33.txt', reason: 'TooManyFiles', message: 'over the cap of 32 files' },
      ]);
    });

    test('an image over 1 MiB is returned as a link, saying why', async () => {
      const { result } = await run({
        template: 'python',
        code: [png('big.png', MiB + 1), png('small.png', 1000)].join('\n'),
        outputs: ['*.png'],
      });
      const big = result.outputs?.files.find((f) => f.path === 'big.png');
      assert.equal(big?.delivery, 'link');
      assert.match(big?.note ?? '', /over the 1 MiB cap on an inline image/);
      assert.equal(result.outputs?.files.find((f) => f.path === 'small.png')?.delivery, 'image');
    });

    test('files of random bytes over the runner pipe’s 1 MiB and many data frames come back byte for byte', async () => {
      const { result, id } = await run({
        template: 'python',
        code: [
          'import hashlib, os',
          'for name, size in (("a.bin", 3 * 1024 * 1024 + 7), ("b.bin", 65535), ("c.bin", 65536)):',
          '    data = os.urandom(size)',
          '    open(name, "wb").write(data)',
          '    print(name, hashlib.sha256(data).hexdigest())',
        ].join('\n'),
        outputs: ['*.bin'],
        resources: { ephemeralStorage: '16Mi' },
      });
      assert.equal(result.phase, 'Succeeded', result.stderr);
      const printed = new Map(
        result.stdout
          .trim()
          .split('\n')
          .map((l) => l.split(' ') as [string, string]),
      );
      assert.equal(printed.size, 3, result.stdout);
      for (const [path, sha] of printed) {
        const data = await backend.files.read(id, path, OWNER);
        assert.equal(createHash('sha256').update(data).digest('hex'), sha, path);
      }
    });

    test('over 16 MiB in all: the file that does not fit is named with the cap; later ones that fit are kept', async () => {
      const { result } = await run({
        template: 'bash',
        code: 'head -c 10485760 /dev/zero > a.bin; head -c 10485760 /dev/zero > b.bin; echo c > c.bin',
        outputs: ['*.bin'],
        resources: { ephemeralStorage: '32Mi' },
      });
      assert.deepEqual(
        result.outputs?.files.map((f) => [f.path, f.bytes]),
        [
          ['a.bin', 10 * MiB],
          ['c.bin', 2],
        ],
      );
      const b = skipOf(result, 'b.bin');
      assert.equal(b?.reason, 'TooLarge');
      assert.match(b?.message ?? '', /over the cap of 16 MiB in all/);
      assert.equal(result.outputs?.bytes, 10 * MiB + 2);
    });
  });
}
