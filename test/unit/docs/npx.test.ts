// Every npx invocation a user can copy (the docs' code, the chart's NOTES, every help text and hint
// in src/) names our own package, sandpit-mcp: the npm name `sandpit` belongs to someone else, and
// `npx -y <their package>` would run whatever they publish next.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** Our npm package (DESIGN §2); the name `sandpit` is someone else's. */
const PACKAGE = 'sandpit-mcp';
const SKIP = new Set(['node_modules', 'dist', '.git', '.scratch']);

function walk(dir: string, keep: (file: string) => boolean): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...walk(file, keep));
    else if (keep(file)) out.push(file);
  }
  return out;
}

/** The code of a Markdown file: fenced blocks and inline spans (prose is not copied into a shell). */
function markdownCode(text: string): string[] {
  const blocks = [...text.matchAll(/^```[^\n]*\n([\s\S]*?)^```/gm)].map((m) => m[1]!);
  const prose = text.replace(/^```[^\n]*\n[\s\S]*?^```/gm, '');
  return [...blocks, ...[...prose.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!)];
}

interface Invocation {
  file: string;
  text: string;
  /** The package npx would fetch and run: the first argument that is not an option. */
  pkg: string | undefined;
}

const WITH_VALUE = new Set(['-p', '--package', '-c', '--call']);

function packageOf(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-p' || a === '--package') return args[i + 1];
    if (a.startsWith('--package=')) return a.slice('--package='.length);
    if (WITH_VALUE.has(a)) i++;
    else if (!a.startsWith('-')) return a;
  }
  return undefined;
}

/** `npx -y pkg …` in shell text, and `"command": "npx", "args": [...]` in client JSON. */
export function npxInvocations(file: string, text: string): Invocation[] {
  const out: Invocation[] = [];
  for (const m of text.matchAll(/(?<![\w-])npx((?:[ \t]+[^\s`"'|&;)]+)+)/g)) {
    out.push({ file, text: m[0], pkg: packageOf(m[1]!.trim().split(/\s+/)) });
  }
  for (const m of text.matchAll(/"command"\s*:\s*"npx"\s*,\s*"args"\s*:\s*(\[[^\]]*\])/g)) {
    out.push({ file, text: m[0], pkg: packageOf(JSON.parse(m[1]!) as string[]) });
  }
  return out;
}

function allInvocations(): Invocation[] {
  const rel = (f: string): string => path.relative(ROOT, f);
  const docs = walk(ROOT, (f) => f.endsWith('.md')).flatMap((f) =>
    markdownCode(readFileSync(f, 'utf8')).flatMap((code) => npxInvocations(rel(f), code)),
  );
  const texts = [
    ...walk(path.join(ROOT, 'src'), (f) => f.endsWith('.ts')),
    path.join(ROOT, 'charts/sandpit/templates/NOTES.txt'),
  ].flatMap((f) => npxInvocations(rel(f), readFileSync(f, 'utf8')));
  return [...docs, ...texts];
}

test('the package is called sandpit-mcp and has exactly one bin, sandpit (npx runs a package’s only bin)', () => {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    name: string;
    bin: Record<string, string>;
  };
  assert.equal(pkg.name, PACKAGE);
  assert.deepEqual(Object.keys(pkg.bin), ['sandpit']);
});

test('the extractor finds shell and JSON forms, with or without -y, and names what npx would fetch', () => {
  const found = npxInvocations(
    'x',
    'claude mcp add s -- npx -y sandpit mcp\nnpx --yes -p other sandpit\n"command": "npx", "args": ["-y", "thing", "mcp"]',
  );
  assert.deepEqual(
    found.map((i) => i.pkg),
    ['sandpit', 'other', 'thing'],
  );
  assert.deepEqual(npxInvocations('x', 'npx then finds the install'), [
    { file: 'x', text: 'npx then finds the install', pkg: 'then' },
  ]);
});

test('every npx invocation in the docs, NOTES.txt and the help texts and hints names sandpit-mcp', () => {
  const found = allInvocations();
  const wrong = found.filter((i) => i.pkg !== PACKAGE && !i.pkg?.startsWith(`${PACKAGE}@`));
  assert.deepEqual(
    wrong.map((i) => `${i.file}: ${i.text}`),
    [],
    `every npx must run ${PACKAGE}, our package`,
  );
  // Not vacuous: the snippets users copy are among them.
  const count = (file: string): number => found.filter((i) => i.file === file).length;
  assert.ok(count('docs/mcp.md') >= 4, `docs/mcp.md has its stdio snippets (found ${count('docs/mcp.md')})`);
  assert.ok(count('README.md') >= 1, 'README.md names the stdio command');
  assert.ok(count('src/cmd/mcp.ts') >= 1, '`sandpit mcp --help` shows the client registration');
});
