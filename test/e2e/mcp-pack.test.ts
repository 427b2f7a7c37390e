/**
 * What a user gets from npm: `npm pack`, `npm install <tarball>` into an empty directory (the
 * dependencies come from the registry), then `npx sandpit-mcp mcp` answers tools/list over stdio
 * (the package is sandpit-mcp; its one bin is sandpit).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { requireDocker } from '../support/docker.js';
import { callTool, cleanEnv, connectStdio, ensureBuilt, ROOT, tempDir } from './helpers.js';
import { TOOL_NAMES } from '../../src/gateway/mcp/tools/index.js';

before(async () => {
  await requireDocker();
  ensureBuilt();
});

test('npm pack → npm install <tgz> → npx sandpit-mcp --help, and npx sandpit-mcp mcp answers tools/list', async () => {
  const packDir = tempDir('pack');
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: ROOT, encoding: 'utf8' }),
  ) as {
    filename: string;
    files: { path: string }[];
  }[];
  assert.match(packed[0]!.filename, /^sandpit-mcp-\d+\.\d+\.\d+\.tgz$/);
  const tarball = join(packDir, packed[0]!.filename);
  const paths = packed[0]!.files.map((f) => f.path);
  assert.ok(
    paths.includes('dist/cmd/cli.js') && paths.includes('dist/gateway/mcp/server.js'),
    'the build is in the package',
  );
  assert.ok(!paths.some((p) => p.startsWith('src/') || p.startsWith('test/')), 'sources and tests are not');

  const installDir = tempDir('install');
  writeFileSync(
    join(installDir, 'package.json'),
    JSON.stringify({ name: 'sandpit-install-check', version: '1.0.0', private: true }),
  );
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', tarball], {
    cwd: installDir,
    stdio: 'pipe',
    timeout: 600_000,
  });
  assert.ok(existsSync(join(installDir, 'node_modules/.bin/sandpit')), 'the bin is linked');
  const help = execFileSync('npx', ['--no-install', 'sandpit-mcp', '--help'], {
    cwd: installDir,
    encoding: 'utf8',
    env: cleanEnv(),
  });
  assert.match(help, /^usage: sandpit <command>/);
  for (const command of ['run', 'mcp', 'serve', 'doctor', 'images', 'setup', 'operator'])
    assert.match(help, new RegExp(`\\n  ${command} `));
  const images = execFileSync('npx', ['--no-install', 'sandpit-mcp', 'images', '--help'], {
    cwd: installDir,
    encoding: 'utf8',
    env: cleanEnv(),
  });
  assert.match(images, /usage: sandpit images build/);
  assert.ok(
    paths.includes('images/build.sh') && paths.includes('scripts/docker-engine.sh'),
    'setup and image builds ship',
  );

  const server = await connectStdio({
    command: 'npx',
    args: ['--no-install', 'sandpit-mcp', 'mcp'],
    cwd: installDir,
    env: cleanEnv(),
  });
  try {
    const { tools } = await server.client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
    assert.equal(server.client.getServerVersion()?.name, 'sandpit');
    const r = await callTool(server.client, 'run_code', { code: 'print("from the installed package")' });
    assert.equal(r.structuredContent?.stdout, 'from the installed package\n');
  } finally {
    await server.close();
    rmSync(installDir, { recursive: true, force: true });
    rmSync(packDir, { recursive: true, force: true });
  }
});
