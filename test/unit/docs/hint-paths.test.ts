// The paths that messages, hints and help texts name (every string in src/) exist for a user of the
// npm package too: they are in the package (package.json "files"). And none is a script to run by
// hand: the command for that is `sandpit setup` or `sandpit images build`.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const FILES = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { files: string[] })
  .files;
/** Repository folders a string might name. */
const PATH = /(?<![\w./-])((?:scripts|deploy|images|charts|crds|docs|test|src|bench|dist)\/[\w./-]*)/g;
/** The generated CRD's header says which sources it came from: for the repository's developers. */
const EXEMPT = new Set(['src/api/v1alpha1/render.ts']);

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

/** Every path named in a string literal or template text of a source file (not in comments or imports). */
function namedPaths(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) return;
    if (
      ts.isStringLiteral(node) ||
      ts.isNoSubstitutionTemplateLiteral(node) ||
      ts.isTemplateLiteralToken(node)
    ) {
      for (const m of node.text.matchAll(PATH)) out.push(m[1]!);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

const ships = (p: string): boolean =>
  FILES.some((f) => (f.endsWith('/') ? p.startsWith(f) || `${p}/` === f : p === f));

test('every path a message names ships in the npm package, and none is a script', () => {
  const found = walk(path.join(ROOT, 'src'))
    .filter((f) => !EXEMPT.has(path.relative(ROOT, f)))
    .flatMap((f) => namedPaths(f).map((p) => ({ file: path.relative(ROOT, f), path: p })));
  assert.ok(found.length >= 3, `the scan finds the paths messages name (found ${found.length})`);
  const bad = found.filter((x) => !ships(x.path) || x.path.endsWith('.sh'));
  assert.deepEqual(
    bad.map((x) => `${x.file}: ${x.path}`),
    [],
    'name what a package user has: a command (`sandpit setup`), or a file in package.json "files"',
  );
});

test('the scan sees strings and template text, and skips comments and imports', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-hint-paths-'));
  try {
    const file = path.join(dir, 'x.ts');
    writeFileSync(
      file,
      [
        "import { a } from 'src/not-a-message.js';",
        '// see deploy/in-a-comment.yaml',
        "const hint = 'run scripts/x.sh';",
        'const more = `apply deploy/${a}.yaml, then docs/y.md`;',
      ].join('\n'),
    );
    assert.deepEqual(namedPaths(file), ['scripts/x.sh', 'deploy/', 'docs/y.md']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
