/**
 * Hostile request inputs (issue 21) against every MCP tool (Streamable HTTP, stateful and
 * stateless) and REST route of the hostile gateway on Docker: paths that leave the workspace
 * (`..`, absolute, symlinks, NUL), huge argv, env and file counts, variables that could steer the
 * runner, image names that try to pass the allowlist, limits that are negative, zero or huge, text
 * that is not UTF-8, and JSON-RPC that is malformed, batched, oversized or of another type.
 *
 * Each refusal is a typed error (its code, and the HTTP status or JSON-RPC error), starts no
 * sandbox (the engine created no container meanwhile), and loses nothing: the same client's next
 * request is answered and the file's session still serves. What is accepted (variables the runner
 * ignores, non-UTF-8 bytes in files, outputs outside the workspace) behaves as it should.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { connectHttp, waitFor, type Connected } from '../e2e/helpers.js';
import { CANARY, INITIALIZE } from './gateway.js';
import {
  assertNothingStarted,
  assertRefused,
  assertRpcRefused,
  assertToolRefused,
  leftovers,
  send,
  serveOnDocker,
  type Answer,
  type Sent,
  type Served,
} from './served.js';
import { MCP_ACCEPT } from '../support/mcp-raw.js';

let g: Served;
let mcp: Connected;
/** A live session whose workspace holds symlinks out (pw, etclink, up, d/e, outlink) and in (inlink). */
let session: string;

const rest = (path: string, sent?: Sent) => send(g.url, path, sent);
const files = (path: string) => `/sessions/${session}/files/${path}`;
const call = async (name: string, args: Record<string, unknown>) =>
  (await mcp.client.callTool({ name, arguments: args })) as CallToolResult;

async function exec(command: string[], extra: Record<string, unknown> = {}) {
  const answer = await rest(`/sessions/${session}/exec`, { body: { command, ...extra } });
  assert.equal(answer.status, 200, answer.text);
  return answer.json as {
    phase: string;
    reason?: string;
    exitCode: number | null;
    stdout: string;
    message?: string;
  };
}

// One suite, as every hostile category is, so the reliability report counts its cases.
describe('hostile: request inputs (docker)', () => {
  before(async () => {
    g = await serveOnDocker();
    mcp = await connectHttp(`${g.url}/mcp`, CANARY);
    const created = await rest('/sessions', { body: { template: 'python' } });
    assert.equal(created.status, 201, created.text);
    session = (created.json as { id: string }).id;
    const made = await exec([
      'sh',
      '-c',
      'mkdir -p d keep /tmp/outside && echo k > keep/f && echo o > /tmp/outside/f && echo safe > safe.txt && ' +
        'ln -s /etc/passwd pw && ln -s /etc etclink && ln -s .. up && ln -s ../../etc d/e && ' +
        'ln -s /tmp/outside outlink && ln -s keep inlink',
    ]);
    assert.equal(made.exitCode, 0, JSON.stringify(made));
  });

  after(async () => {
    await mcp?.close();
    await rest(`/sessions/${session}`, { method: 'DELETE' });
    await g?.close();
    assert.deepEqual(await leftovers(g.docker), [], 'no container is left');
  });

  /** The next valid request of each client is answered, and the session still serves. */
  async function stillServes(): Promise<void> {
    const templates = await call('list_templates', {});
    assert.notEqual(templates.isError, true, JSON.stringify(templates));
    const got = await rest(`/sessions/${session}`);
    assert.equal(got.status, 200, got.text);
    assert.equal((got.json as { state: string }).state, 'Ready', got.text);
  }

  /** A case whose every request is refused: typed errors (the case asserts them), no sandbox started, nothing lost. */
  function refused(name: string, attempt: () => Promise<void>): void {
    test(name, async () => {
      const since = Date.now();
      await attempt();
      await assertNothingStarted(g.docker, since);
      await stillServes();
    });
  }

  /** A case whose input is legitimately accepted: it asserts what correct behaviour is; nothing is lost after. */
  function accepted(name: string, attempt: () => Promise<void>): void {
    test(name, async () => {
      await attempt();
      await stillServes();
    });
  }

  // Paths: traversal, symlinks and NUL bytes.

  refused(
    'session files: .. and absolute paths, plain or percent-encoded, are INVALID_REQUEST on every file route',
    async () => {
      for (const p of [
        '../../etc/passwd',
        '..',
        './../x',
        '%2e%2e/%2e%2e/etc/passwd',
        '..%2F..%2Fetc%2Fpasswd',
        '%2Fetc%2Fpasswd',
        '/etc/passwd',
      ]) {
        assertRefused(await rest(files(p)), 400, 'INVALID_REQUEST', 'path');
        assertRefused(
          await rest(files(p), {
            method: 'PUT',
            body: 'x',
            headers: { 'Content-Type': 'application/octet-stream' },
          }),
          400,
          'INVALID_REQUEST',
          'path',
        );
        assertRefused(
          await rest(`${files(p)}?recursive=true`, { method: 'DELETE' }),
          400,
          'INVALID_REQUEST',
          'path',
        );
      }
      for (const q of ['../..', '/etc', '%2e%2e']) {
        assertRefused(await rest(`/sessions/${session}/files?path=${q}`), 400, 'INVALID_REQUEST', 'path');
        assertRefused(await rest(`/sessions/${session}/artifacts?path=${q}`), 400, 'INVALID_REQUEST', 'path');
      }
      for (const tool of ['sandbox_read_file', 'sandbox_list_files'])
        for (const path of ['../etc/passwd', '/', '/etc'])
          await assertToolRefused(mcp.client, tool, { sessionId: session, path }, 'INVALID_REQUEST', 'path');
      await assertToolRefused(
        mcp.client,
        'sandbox_write_file',
        { sessionId: session, path: '../x', content: 'x' },
        'INVALID_REQUEST',
        'path',
      );
    },
  );

  refused(
    'session files: a path through a symlink that leads out of the workspace is INVALID_REQUEST, never followed',
    async () => {
      for (const p of ['pw', 'etclink/passwd', 'up/etc/passwd', 'd/e/passwd', 'outlink/f']) {
        assertRefused(await rest(files(p)), 400, 'INVALID_REQUEST', 'path');
        assertRefused(
          await rest(files(p), {
            method: 'PUT',
            body: 'x',
            headers: { 'Content-Type': 'application/octet-stream' },
          }),
          400,
          'INVALID_REQUEST',
          'path',
        );
        await assertToolRefused(
          mcp.client,
          'sandbox_read_file',
          { sessionId: session, path: p },
          'INVALID_REQUEST',
          'path',
        );
        await assertToolRefused(
          mcp.client,
          'sandbox_write_file',
          { sessionId: session, path: p, content: 'x' },
          'INVALID_REQUEST',
          'path',
        );
      }
      for (const p of ['etclink', 'up', 'outlink']) {
        assertRefused(await rest(`/sessions/${session}/files?path=${p}`), 400, 'INVALID_REQUEST', 'path');
        assertRefused(await rest(`/sessions/${session}/artifacts?path=${p}`), 400, 'INVALID_REQUEST', 'path');
        await assertToolRefused(
          mcp.client,
          'sandbox_list_files',
          { sessionId: session, path: p },
          'INVALID_REQUEST',
          'path',
        );
      }
      const outside = await exec(['cat', '/tmp/outside/f']);
      assert.equal(outside.stdout, 'o\n', 'what the link points at is unchanged');
    },
  );

  refused('NUL bytes in a path, a cwd, an argument or a variable are INVALID_REQUEST', async () => {
    assertRefused(await rest(files('a%00b')), 400, 'INVALID_REQUEST', 'path');
    assertRefused(await rest(`/sessions/${session}/artifacts?path=a%00b`), 400, 'INVALID_REQUEST', 'path');
    await assertToolRefused(
      mcp.client,
      'sandbox_read_file',
      { sessionId: session, path: 'safe.txt\u0000/x' },
      'INVALID_REQUEST',
      'path',
    );
    await assertToolRefused(
      mcp.client,
      'sandbox_write_file',
      { sessionId: session, path: 'a\u0000b', content: 'x' },
      'INVALID_REQUEST',
      'path',
    );
    const bodies: [string, Record<string, unknown>, string][] = [
      [`/sessions/${session}/exec`, { command: ['pwd'], cwd: 'keep\u0000' }, 'cwd'],
      [`/sessions/${session}/exec`, { command: ['echo', 'a\u0000b'] }, 'command'],
      ['/runs', { template: 'python', code: '', files: [{ path: 'a\u0000b', content: '' }] }, 'files'],
      ['/runs', { template: 'bash', command: ['echo', 'x\u0000'] }, 'command'],
      ['/runs', { template: 'python', code: '', env: [{ name: 'A', value: 'x\u0000y' }] }, 'env'],
    ];
    for (const [route, body, field] of bodies)
      assertRefused(await rest(route, { body }), 400, 'INVALID_REQUEST', field);
    await assertToolRefused(
      mcp.client,
      'run_command',
      { command: ['a\u0000b'] },
      'INVALID_REQUEST',
      'command',
    );
  });

  refused('a URL path that is not percent-encoded UTF-8 is INVALID_REQUEST, not a 500', async () => {
    for (const p of ['%ff%fe', '%zz', '%ED%A0%80']) {
      assertRefused(await rest(files(p)), 400, 'INVALID_REQUEST', '(path)');
      assertRefused(await rest(`/runs/${p}`), 400, 'INVALID_REQUEST', '(path)');
    }
  });

  refused('run and session ids that try to traverse are NOT_FOUND, as any unknown id is', async () => {
    for (const path of [
      '/runs/..%2F..%2Fetc',
      '/runs/x/files/../../../etc/passwd',
      '/runs/x/files/%2e%2e/%2e%2e/etc/passwd',
      '/runs/..%2Fx/artifacts',
    ])
      assertRefused(await rest(path), 404, 'NOT_FOUND');
    assertRefused(await rest('/sessions/..%2F..'), 404, 'NOT_FOUND');
    await assertToolRefused(mcp.client, 'get_run', { runId: '../../etc' }, 'NOT_FOUND');
    await assertToolRefused(
      mcp.client,
      'sandbox_exec',
      { sessionId: '../ses', command: ['pwd'] },
      'NOT_FOUND',
    );
  });

  refused(
    'a run’s input files with .., absolute, too deep or duplicated paths are INVALID_REQUEST',
    async () => {
      for (const path of ['../x', '/etc/x', 'a/../../x', `${'d/'.repeat(17)}x`, 'a\\b']) {
        assertRefused(
          await rest('/runs', { body: { template: 'python', code: '', files: [{ path, content: '' }] } }),
          400,
          'INVALID_REQUEST',
          'files',
        );
        await assertToolRefused(
          mcp.client,
          'run_code',
          { code: '', files: [{ path, content: '' }] },
          'INVALID_REQUEST',
          'files',
        );
      }
      const twice = [
        { path: 'a', content: '' },
        { path: 'a', content: '' },
      ];
      assertRefused(
        await rest('/runs', { body: { template: 'python', code: '', files: twice } }),
        400,
        'INVALID_REQUEST',
        'files',
      );
    },
  );

  refused(
    'an exec’s cwd outside the workspace is INVALID_REQUEST; through a symlink out, or missing, the exec is Rejected',
    async () => {
      for (const cwd of ['../..', '/etc', '/workspace/../etc']) {
        assertRefused(
          await rest(`/sessions/${session}/exec`, { body: { command: ['pwd'], cwd } }),
          400,
          'INVALID_REQUEST',
          'cwd',
        );
        await assertToolRefused(
          mcp.client,
          'sandbox_exec',
          { sessionId: session, command: ['pwd'], cwd },
          'INVALID_REQUEST',
          'cwd',
        );
      }
      for (const cwd of ['up', 'etclink', 'd/e', 'no-such-dir']) {
        const r = await exec(['pwd'], { cwd });
        assert.equal(r.phase, 'Rejected', JSON.stringify(r));
        assert.equal(r.reason, 'PolicyDenied', JSON.stringify(r));
        assert.match(r.message ?? '', /^cwd: /);
        assert.equal(r.exitCode, null);
      }
    },
  );

  accepted(
    'deleting a symlink removes the link, never what it points at (in the workspace or out of it)',
    async () => {
      for (const link of ['inlink', 'outlink']) {
        const answer = await rest(`${files(link)}?recursive=true`, { method: 'DELETE' });
        assert.equal(answer.status, 204, answer.text);
      }
      const r = await exec(['sh', '-c', 'cat keep/f /tmp/outside/f; ls inlink outlink 2>&1 | wc -l']);
      assert.equal(r.stdout, 'k\no\n2\n', 'the targets are intact and the links gone');
    },
  );

  accepted(
    'outputs outside the workspace are named OutsideWorkspace and nothing of them is returned',
    async () => {
      const answer = await rest('/runs', {
        body: {
          template: 'python',
          code: "print('ran')",
          outputs: ['../../etc/passwd', '/etc/passwd', 'x/../../y'],
        },
      });
      assert.equal(answer.status, 200, answer.text);
      const r = answer.json as {
        phase: string;
        stdout: string;
        outputs: { files: unknown[]; skipped: { entry: string; reason: string }[] };
      };
      assert.equal(r.phase, 'Succeeded', answer.text);
      assert.deepEqual(r.outputs.files, []);
      assert.deepEqual(r.outputs.skipped.map((s) => [s.entry, s.reason]).sort(), [
        ['../../etc/passwd', 'OutsideWorkspace'],
        ['/etc/passwd', 'OutsideWorkspace'],
        ['x/../../y', 'OutsideWorkspace'],
      ]);
    },
  );

  accepted(
    'a run’s returned files: a download path that leaves them is refused as INVALID_REQUEST or NOT_FOUND',
    async () => {
      const answer = await rest('/runs', {
        body: { template: 'bash', code: 'echo out > out.txt', outputs: ['out.txt'] },
      });
      assert.equal(answer.status, 200, answer.text);
      const runId = (answer.json as { runId: string }).runId;
      const got = await rest(`/runs/${runId}/files/out.txt`);
      assert.equal(got.text, 'out\n');
      for (const p of [
        '../../../etc/passwd',
        '%2e%2e/%2e%2e/etc/passwd',
        '..%2F..%2Fetc%2Fpasswd',
        '%2Fetc%2Fpasswd',
        'a%00b',
      ]) {
        const bad = await rest(`/runs/${runId}/files/${p}`);
        assert.ok([400, 404].includes(bad.status), `${p}: ${bad.text}`);
        assertRefused(bad, bad.status, bad.status === 400 ? 'INVALID_REQUEST' : 'NOT_FOUND');
      }
    },
  );

  // Huge argv, env and file counts.

  refused('argv: more than 256 arguments, one over 128 KiB, or over 1 MiB in all is refused', async () => {
    const many = Array<string>(257).fill('x');
    const long = 'x'.repeat(128 * 1024);
    const total = Array<string>(200).fill('y'.repeat(6000));
    for (const command of [many, ['echo', long]]) {
      assertRefused(
        await rest('/runs', { body: { template: 'bash', command } }),
        400,
        'INVALID_REQUEST',
        'command',
      );
      assertRefused(
        await rest(`/sessions/${session}/exec`, { body: { command } }),
        400,
        'INVALID_REQUEST',
        'command',
      );
      await assertToolRefused(mcp.client, 'run_command', { command }, 'INVALID_REQUEST', 'command');
      await assertToolRefused(
        mcp.client,
        'sandbox_exec',
        { sessionId: session, command },
        'INVALID_REQUEST',
        'command',
      );
    }
    assertRefused(
      await rest('/runs', { body: { template: 'bash', command: total } }),
      400,
      'INVALID_REQUEST',
      'command',
    );
    assertRefused(
      await rest(`/sessions/${session}/exec`, { body: { command: total } }),
      400,
      'INVALID_REQUEST',
      'command',
    );
  });

  refused(
    'env: thousands of variables, or one over 128 KiB, are refused on runs, sessions and execs',
    async () => {
      const many = Array.from({ length: 5000 }, (_, i) => ({ name: `V${i}`, value: '' }));
      assertRefused(
        await rest('/runs', { body: { template: 'python', code: '', env: many } }),
        403,
        'POLICY_DENIED',
        'env',
      );
      await assertToolRefused(mcp.client, 'run_code', { code: '', env: many }, 'POLICY_DENIED', 'env');
      const long = [{ name: 'BIG', value: 'x'.repeat(128 * 1024) }];
      assertRefused(
        await rest('/runs', { body: { template: 'python', code: '', env: long } }),
        400,
        'INVALID_REQUEST',
        'env',
      );
      assertRefused(
        await rest('/sessions', { body: { template: 'python', env: long } }),
        400,
        'INVALID_REQUEST',
        'env',
      );
      assertRefused(
        await rest(`/sessions/${session}/exec`, { body: { command: ['true'], env: long } }),
        400,
        'INVALID_REQUEST',
        'env',
      );
      const half = Array.from({ length: 10 }, (_, i) => ({ name: `H${i}`, value: 'x'.repeat(60_000) }));
      assertRefused(
        await rest('/sessions', { body: { template: 'python', env: half } }),
        400,
        'INVALID_REQUEST',
        'env',
      );
    },
  );

  refused('files: thousands of them, or more bytes than the workspace holds, are POLICY_DENIED', async () => {
    const many = Array.from({ length: 5000 }, (_, i) => ({ path: `f${i}`, content: '' }));
    assertRefused(
      await rest('/runs', { body: { template: 'python', code: '', files: many } }),
      403,
      'POLICY_DENIED',
      'files',
    );
    await assertToolRefused(mcp.client, 'run_code', { code: '', files: many }, 'POLICY_DENIED', 'files');
    const big = Buffer.alloc(3 * 1024 * 1024).toString('base64');
    const twice = [
      { path: 'a', content: big, encoding: 'base64' },
      { path: 'b', content: big, encoding: 'base64' },
    ];
    const answer = await rest('/runs', { body: { template: 'python', code: '', files: twice } });
    assertRefused(answer, 403, 'POLICY_DENIED');
  });

  // Variables that could steer the runner.

  accepted(
    'LD_PRELOAD, LD_LIBRARY_PATH, PATH and the like reach the program only: the runner still reports and enforces',
    async () => {
      const env = [
        { name: 'LD_PRELOAD', value: '/workspace/evil.so' },
        { name: 'LD_LIBRARY_PATH', value: '/workspace' },
        { name: 'PATH', value: '/workspace' },
        { name: 'PYTHONSTARTUP', value: '/workspace/evil.py' },
        { name: 'SANDPIT_RUNNER', value: 'x' },
      ];
      const ran = await rest('/runs', { body: { template: 'bash', command: ['/usr/bin/env'], env } });
      assert.equal(ran.status, 200, ran.text);
      const r = ran.json as { phase: string; exitCode: number; stdout: string };
      assert.equal(r.phase, 'Succeeded', ran.text);
      assert.equal(r.exitCode, 0);
      for (const e of env)
        assert.ok(r.stdout.includes(`${e.name}=${e.value}\n`), `${e.name} reached the program`);
      // The deadline is the runner's: a variable the program's loader reads does not lift it.
      const slow = await rest('/runs', {
        body: { template: 'bash', command: ['/bin/sleep', '30'], env, timeoutSeconds: 1 },
      });
      const s = slow.json as { phase: string; timedOut: boolean };
      assert.equal(s.phase, 'TimedOut', slow.text);
      assert.equal(s.timedOut, true);
      const inSession = await exec(['/usr/bin/env'], { env });
      assert.equal(inSession.exitCode, 0);
      assert.match(inSession.stdout, /^LD_PRELOAD=\/workspace\/evil\.so$/m);
    },
  );

  refused(
    'variable names that are not names (NAME=, spaces, empty, dashes) are INVALID_REQUEST',
    async () => {
      for (const name of ['LD_PRELOAD=/x.so', 'A B', '', '-x', '1A', 'A\u0000']) {
        const env = [{ name, value: 'v' }];
        assertRefused(
          await rest('/runs', { body: { template: 'python', code: '', env } }),
          400,
          'INVALID_REQUEST',
          'env',
        );
        assertRefused(
          await rest('/sessions', { body: { template: 'python', env } }),
          400,
          'INVALID_REQUEST',
          'env',
        );
        assertRefused(
          await rest(`/sessions/${session}/exec`, { body: { command: ['true'], env } }),
          400,
          'INVALID_REQUEST',
          'env',
        );
      }
    },
  );

  // Images: the allowlist is sandpit/*.

  refused(
    'image names that try to pass the allowlist (case, registry, .., look-alikes, other repositories) are POLICY_DENIED',
    async () => {
      for (const image of [
        'SANDPIT/python:3.11',
        'Sandpit/python:3.11',
        'evil.example/sandpit/python:3.11',
        'localhost:5000/sandpit/python:3.11',
        'sandpit/../python:3.11',
        'sandpit/./python:3.11',
        'sandpitx/python:3.11',
        'sandpit',
        'python:3.11',
        'docker.io/library/python:3.11',
        'sandpit/python:3.11 ',
        'sandpit/python:3.11\n',
        '/sandpit/python:3.11',
      ]) {
        assertRefused(
          await rest('/runs', { body: { image, command: ['true'] } }),
          403,
          'POLICY_DENIED',
          'image',
        );
        assertRefused(await rest('/sessions', { body: { image } }), 403, 'POLICY_DENIED', 'image');
        await assertToolRefused(mcp.client, 'run_code', { code: '', image }, 'POLICY_DENIED', 'image');
      }
    },
  );

  refused(
    'an allowed repository at a tag or digest the engine does not hold is IMAGE_NOT_FOUND, before any container',
    async () => {
      for (const image of [
        'sandpit/python:nope',
        `sandpit/python:3.11@sha256:${'0'.repeat(64)}`,
        'sandpit/nothing:1',
      ]) {
        assertRefused(await rest('/runs', { body: { image, command: ['true'] } }), 503, 'IMAGE_NOT_FOUND');
        await assertToolRefused(mcp.client, 'run_command', { image, command: ['true'] }, 'IMAGE_NOT_FOUND');
      }
    },
  );

  // Limits: negative, zero, huge.

  refused('negative and zero limits are INVALID_REQUEST, field by field', async () => {
    const run = { template: 'python', code: '' };
    for (const [field, body] of [
      ['timeoutSeconds', { ...run, timeoutSeconds: -1 }],
      ['timeoutSeconds', { ...run, timeoutSeconds: 0 }],
      ['timeoutSeconds', { ...run, timeoutSeconds: 0.5 }],
      ['resources.memory', { ...run, resources: { memory: '-1Mi' } }],
      ['resources.memory', { ...run, resources: { memory: 0 } }],
      ['resources.cpu', { ...run, resources: { cpu: '-1' } }],
      ['resources.cpu', { ...run, resources: { cpu: '0m' } }],
      ['resources.cpu', { ...run, resources: { cpu: 'NaN' } }],
      ['resources.pids', { ...run, resources: { pids: 0 } }],
      ['resources.ephemeralStorage', { ...run, resources: { ephemeralStorage: '0' } }],
    ] as const) {
      assertRefused(await rest('/runs', { body: body }), 400, 'INVALID_REQUEST', field);
      const { template: _, ...args } = body;
      await assertToolRefused(mcp.client, 'run_code', args, 'INVALID_REQUEST', field);
    }
    for (const [field, value] of [
      ['ttlSeconds', 0],
      ['idleTimeoutSeconds', -5],
      ['timeoutSeconds', 0],
    ] as const) {
      assertRefused(
        await rest('/sessions', { body: { template: 'python', [field]: value } }),
        400,
        'INVALID_REQUEST',
        field,
      );
      await assertToolRefused(
        mcp.client,
        'sandbox_create',
        { template: 'python', [field]: value },
        'INVALID_REQUEST',
        field,
      );
    }
    assertRefused(
      await rest(`/sessions/${session}/exec`, { body: { command: ['true'], timeoutSeconds: 0 } }),
      400,
      'INVALID_REQUEST',
      'timeoutSeconds',
    );
    await assertToolRefused(
      mcp.client,
      'sandbox_exec',
      { sessionId: session, command: ['true'], timeoutSeconds: -1 },
      'INVALID_REQUEST',
      'timeoutSeconds',
    );
  });

  refused('huge limits are refused over the ceiling, naming the field', async () => {
    const run = { template: 'python', code: '' };
    for (const [field, body] of [
      ['timeoutSeconds', { ...run, timeoutSeconds: 1e12 }],
      ['resources.memory', { ...run, resources: { memory: '1Ei' } }],
      ['resources.cpu', { ...run, resources: { cpu: '1000' } }],
      ['resources.pids', { ...run, resources: { pids: 1e9 } }],
      ['resources.ephemeralStorage', { ...run, resources: { ephemeralStorage: '1000Gi' } }],
    ] as const) {
      const answer = await rest('/runs', { body });
      assertRefused(
        answer,
        answer.status === 400 ? 400 : 403,
        answer.status === 400 ? 'INVALID_REQUEST' : 'POLICY_DENIED',
        field,
      );
    }
    assertRefused(
      await rest(`/sessions/${session}/exec`, { body: { command: ['true'], timeoutSeconds: 1e8 } }),
      403,
      'POLICY_DENIED',
      'timeoutSeconds',
    );
    for (const field of ['ttlSeconds', 'idleTimeoutSeconds', 'timeoutSeconds'])
      assertRefused(
        await rest('/sessions', { body: { template: 'python', [field]: 1e15 } }),
        400,
        'INVALID_REQUEST',
        field,
      );
    const memory = await rest('/sessions', { body: { template: 'python', resources: { memory: '64Gi' } } });
    assertRefused(memory, 403, 'POLICY_DENIED', 'resources.memory');
  });

  // Text that is not UTF-8.

  refused('a request body that is not UTF-8, or code with a lone surrogate, is INVALID_REQUEST', async () => {
    const latin1 = Buffer.from('{"template":"python","code":"print(\'\xe9\')"}', 'latin1');
    assertRefused(
      await rest('/runs', { body: latin1, headers: { 'Content-Type': 'application/json' } }),
      400,
      'INVALID_REQUEST',
    );
    assertRefused(
      await rest(`/sessions/${session}/exec`, {
        body: Buffer.from('{"command":["echo","\xff"]}', 'latin1'),
        headers: { 'Content-Type': 'application/json' },
      }),
      400,
      'INVALID_REQUEST',
    );
    const rpc = await send(g.statelessUrl, '/mcp', {
      body: Buffer.from(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"\xff"}}}',
        'latin1',
      ),
      headers: { 'Content-Type': 'application/json', ...MCP_ACCEPT },
    });
    assertRpcRefused(rpc, 400, -32700, 'INVALID_REQUEST');
    assertRefused(
      await rest('/runs', { body: { template: 'python', code: "print('\ud800')" } }),
      400,
      'INVALID_REQUEST',
      'code',
    );
    await assertToolRefused(mcp.client, 'run_code', { code: "print('\udfff')" }, 'INVALID_REQUEST', 'code');
  });

  accepted(
    'bytes that are not UTF-8 go in as files (base64, or a raw upload) and run or read back exactly',
    async () => {
      // Latin-1 source, as its coding line says: the program sees é, not a replacement character.
      const source = Buffer.from("# -*- coding: latin-1 -*-\nprint(ascii('\xe9t\xe9'))\n", 'latin1');
      const ran = await rest('/runs', {
        body: {
          template: 'python',
          command: ['python3', 'latin.py'],
          files: [{ path: 'latin.py', content: source.toString('base64'), encoding: 'base64' }],
        },
      });
      const r = ran.json as { phase: string; stdout: string };
      assert.equal(r.phase, 'Succeeded', ran.text);
      assert.equal(r.stdout, "'\\xe9t\\xe9'\n");
      const bytes = Buffer.from([0xff, 0xfe, 0x00, 0xc3, 0x28, 0x80]);
      const put = await rest(files('raw.bin'), {
        method: 'PUT',
        body: bytes,
        headers: { 'Content-Type': 'application/octet-stream' },
      });
      assert.equal(put.status, 201, put.text);
      const check = await exec(['sh', '-c', 'od -An -tx1 raw.bin']);
      assert.equal(check.stdout.trim().split(/\s+/).join(' '), 'ff fe 00 c3 28 80');
      const read = await call('sandbox_read_file', { sessionId: session, path: 'raw.bin' });
      const file = read.structuredContent as { encoding: string; content: string };
      assert.equal(file.encoding, 'base64', JSON.stringify(read));
      assert.deepEqual(Buffer.from(file.content, 'base64'), bytes);
    },
  );

  // JSON-RPC: malformed, batched, oversized, of another type.

  const RUN_CALL = {
    jsonrpc: '2.0',
    id: 2,
    method: 'tools/call',
    params: { name: 'run_code', arguments: { code: 'print(1)' } },
  };

  /** The headers of a stateful MCP session opened by a raw initialize. */
  async function rawSession(): Promise<Record<string, string>> {
    const answer = await send(g.url, '/mcp', { body: INITIALIZE, headers: MCP_ACCEPT });
    const id = answer.headers['mcp-session-id'];
    assert.equal(typeof id, 'string', answer.text);
    return { 'mcp-session-id': id as string, 'mcp-protocol-version': '2025-06-18' };
  }

  /** An /mcp POST on both transports: in a stateful session (opened raw) and stateless. */
  async function bothMcp(sent: Sent, check: (answer: Answer, transport: string) => void): Promise<void> {
    const stateful = await rawSession();
    for (const [transport, base, headers] of [
      ['stateful', g.url, stateful],
      ['stateless', g.statelessUrl, {}],
    ] as const)
      check(
        await send(base, '/mcp', { ...sent, headers: { ...MCP_ACCEPT, ...headers, ...sent.headers } }),
        transport,
      );
  }

  refused(
    'malformed JSON, and JSON that is no JSON-RPC message, is a 400 JSON-RPC error on both transports',
    async () => {
      const json = { 'Content-Type': 'application/json' };
      for (const body of ['{"jsonrpc":', '{', '', 'null', '42', '"x"', '\u0000'])
        await bothMcp({ body, headers: json }, (a) => assertRpcRefused(a, 400, -32700));
      await bothMcp({ body: { ...INITIALIZE, jsonrpc: '1.0' } }, (a) => assertRpcRefused(a, 400, -32700));
      await bothMcp(
        { body: JSON.stringify(RUN_CALL).replace('"id":2', '"id":{"x":1}'), headers: json },
        (a, t) => assert.equal(a.status, 400, `${t}: ${a.text}`),
      );
    },
  );

  refused(
    'JSON-RPC batches (MCP 2025-06-18 removed them), empty or deeply nested, are a 400 -32600 and nothing in them runs',
    async () => {
      for (const body of [[INITIALIZE, RUN_CALL], [RUN_CALL], [], '['.repeat(50_000) + ']'.repeat(50_000)])
        await bothMcp(
          {
            body: typeof body === 'string' ? body : JSON.stringify(body),
            headers: { 'Content-Type': 'application/json' },
          },
          (a) => assertRpcRefused(a, 400, -32600),
        );
    },
  );

  refused(
    'another Content-Type (or none, or one that lies about its encoding) is refused on /mcp and the REST API',
    async () => {
      for (const type of [
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/jsonx',
      ]) {
        await bothMcp({ body: JSON.stringify(RUN_CALL), headers: { 'Content-Type': type } }, (a) =>
          assertRpcRefused(a, 415, -32600, 'UNSUPPORTED_MEDIA_TYPE'),
        );
        assertRefused(
          await rest('/runs', { body: '{"template":"python","code":""}', headers: { 'Content-Type': type } }),
          415,
          'UNSUPPORTED_MEDIA_TYPE',
          'Content-Type',
        );
        assertRefused(
          await rest('/sessions', { body: '{"template":"python"}', headers: { 'Content-Type': type } }),
          415,
          'UNSUPPORTED_MEDIA_TYPE',
        );
        assertRefused(
          await rest(`/sessions/${session}/exec`, {
            body: '{"command":["true"]}',
            headers: { 'Content-Type': type },
          }),
          415,
          'UNSUPPORTED_MEDIA_TYPE',
        );
      }
      await bothMcp({ body: JSON.stringify(RUN_CALL), headers: { 'Content-Type': '' } }, (a) =>
        assertRpcRefused(a, 415, -32600, 'UNSUPPORTED_MEDIA_TYPE'),
      );
      const lying = { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' };
      await bothMcp({ body: JSON.stringify(RUN_CALL), headers: lying }, (a) =>
        assertRpcRefused(a, 400, -32600, 'INVALID_REQUEST'),
      );
      assertRefused(
        await rest('/runs', { body: '{"template":"python","code":""}', headers: lying }),
        400,
        'INVALID_REQUEST',
      );
      assertRefused(
        await rest('/runs', { body: gzipSync('{}'), headers: { ...lying, 'Content-Encoding': 'x-unknown' } }),
        400,
        'INVALID_REQUEST',
      );
      await bothMcp(
        {
          body: JSON.stringify(RUN_CALL),
          headers: { 'Content-Type': 'application/json', Accept: 'text/html' },
        },
        (a) => assert.equal(a.status, 406, a.text),
      );
    },
  );

  refused(
    'an oversized body is a 413 TOO_LARGE, refused from its Content-Length before it is read',
    async () => {
      const huge = JSON.stringify({
        ...RUN_CALL,
        params: { ...RUN_CALL.params, arguments: { code: 'x'.repeat(9 * 1024 * 1024) } },
      });
      await bothMcp({ body: huge, headers: { 'Content-Type': 'application/json' } }, (a) =>
        assertRpcRefused(a, 413, -32600, 'TOO_LARGE'),
      );
      assertRefused(
        await rest('/runs', { body: { template: 'python', code: 'x'.repeat(9 * 1024 * 1024) } }),
        413,
        'TOO_LARGE',
      );
      // Within the body limit, over the policy's 4 MiB of code, files and stdin.
      const over = {
        template: 'python',
        code: 'x'.repeat(3 * 1024 * 1024),
        stdin: 'y'.repeat(2 * 1024 * 1024),
      };
      assertRefused(await rest('/runs', { body: over }), 403, 'POLICY_DENIED', 'request');
    },
  );

  refused('unknown tools and methods, and arguments of the wrong shape, are typed errors', async () => {
    await assertToolRefused(mcp.client, 'no_such_tool', {}, 'NOT_FOUND');
    await assertToolRefused(
      mcp.client,
      'execute_python_code',
      { code_string: 1 },
      'INVALID_REQUEST',
      'code_string',
    );
    await assertToolRefused(mcp.client, 'run_code', { code: '', unknown: true }, 'INVALID_REQUEST');
    await assertToolRefused(
      mcp.client,
      'sandbox_write_file',
      { sessionId: session, path: 'x', content: '!!', encoding: 'base64' },
      'INVALID_REQUEST',
      'content',
    );
    const method = await send(g.statelessUrl, '/mcp', {
      body: { jsonrpc: '2.0', id: 3, method: 'sandpit/steal', params: {} },
      headers: MCP_ACCEPT,
    });
    assert.equal(method.status, 200, method.text);
    assert.match(method.text, /"code":-32601/);
    const shapeless = await send(g.statelessUrl, '/mcp', {
      body: { ...RUN_CALL, params: { name: 'run_code', arguments: 'print(1)' } },
      headers: MCP_ACCEPT,
    });
    assert.match(shapeless.text, /"code":-32602/, shapeless.text);
  });

  test('after every hostile input, a run over MCP and REST and the session work, and no container is left but the session’s', async () => {
    const ran = await call('run_code', { code: "print('still here')" });
    assert.equal((ran.structuredContent as { stdout: string }).stdout, 'still here\n', JSON.stringify(ran));
    const stateless = await send(g.statelessUrl, '/mcp', { body: RUN_CALL, headers: MCP_ACCEPT });
    assert.equal(stateless.status, 200, stateless.text);
    assert.match(stateless.text, /"exitCode":0/);
    const viaRest = await rest('/runs', { body: { template: 'python', code: "print('rest')" } });
    assert.equal((viaRest.json as { stdout: string }).stdout, 'rest\n', viaRest.text);
    const r = await exec(['cat', 'safe.txt']);
    assert.equal(r.stdout, 'safe\n');
    // A run's container goes after its reply.
    await waitFor('the runs’ containers to go', async () =>
      (await leftovers(g.docker, [session])).length === 0 ? true : undefined,
    );
  });
});
