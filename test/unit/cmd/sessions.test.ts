/**
 * `sandpit sessions` where no engine is needed: its arguments (cp's operands, the create and exec
 * bodies, the gateway address and token), its output (the ls table, the logs headings), how the
 * gateway's refusals become errors and exit codes, and the CLI itself over the real HTTP app on
 * loopback with the in-memory session backend (the schemas it parses are what the gateway sends).
 * The real engine behind it is the e2e tier's (test/e2e/sessions-cli.test.ts).
 */
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { ExecLogEntry, Session } from '../../../src/api/session.js';
import {
  defaultGatewayUrl,
  errorFromAnswer,
  GatewayClient,
  gatewayTarget,
  unreachable,
} from '../../../src/cmd/gateway-client.js';
import { parseCpEnd, relativeEntry } from '../../../src/cmd/session-cp.js';
import { execBody } from '../../../src/cmd/session-exec.js';
import { sessionIdOf } from '../../../src/cmd/session-flags.js';
import { closeError, parseExit } from '../../../src/cmd/session-shell.js';
import { createBody, execHeading, sessionTable, span } from '../../../src/cmd/sessions.js';
import { AppError } from '../../../src/shared/errors.js';
import { serveMemoryGateway, type MemoryGateway } from '../../support/memory-gateway.js';
import { sandpit, sandpitAsync } from '../../support/cli.js';

const code = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof AppError, String(e));
    return `${e.code} ${e.message}`;
  }
  return assert.fail('expected an AppError');
};

describe('cp operands', () => {
  test('- is stdio; ./ and / are local even with a colon; ID:PATH is a session path', () => {
    assert.deepEqual(parseCpEnd('-'), { kind: 'stdio' });
    assert.deepEqual(parseCpEnd('./a:b'), { kind: 'local', path: './a:b', contents: false });
    assert.deepEqual(parseCpEnd('/tmp/x'), { kind: 'local', path: '/tmp/x', contents: false });
    assert.deepEqual(parseCpEnd('out.txt'), { kind: 'local', path: 'out.txt', contents: false });
    assert.deepEqual(parseCpEnd('./dir/.'), { kind: 'local', path: './dir/.', contents: true });
    assert.deepEqual(parseCpEnd('ses-1:data/in.csv'), {
      kind: 'session',
      id: 'ses-1',
      path: 'data/in.csv',
      slash: false,
      contents: false,
    });
  });

  test('ID: and ID:. are the workspace (its contents); DIR/ wants a directory; /workspace/… is relative', () => {
    for (const arg of ['ses-1:', 'ses-1:.', 'ses-1:/workspace'])
      assert.deepEqual(parseCpEnd(arg), {
        kind: 'session',
        id: 'ses-1',
        path: '',
        slash: arg.endsWith('/'),
        contents: true,
      });
    assert.deepEqual(parseCpEnd('ses-1:out/'), {
      kind: 'session',
      id: 'ses-1',
      path: 'out',
      slash: true,
      contents: false,
    });
    assert.deepEqual(parseCpEnd('ses-1:out/.'), {
      kind: 'session',
      id: 'ses-1',
      path: 'out',
      slash: false,
      contents: true,
    });
    assert.equal((parseCpEnd('ses-1:/workspace/a/b') as { path: string }).path, 'a/b');
  });

  test('hostile or malformed operands are refused before any request, naming what is wrong', () => {
    assert.match(
      code(() => parseCpEnd('ses-1:../etc/passwd')),
      /^INVALID_REQUEST invalid session path "..\/etc\/passwd"/,
    );
    assert.match(
      code(() => parseCpEnd('ses-1:/etc/passwd')),
      /^INVALID_REQUEST invalid session path/,
    );
    assert.match(
      code(() => parseCpEnd('ses-1:a\0b')),
      /^INVALID_REQUEST invalid session path/,
    );
    assert.match(
      code(() => parseCpEnd(`ses-1:${'n'.repeat(256)}`)),
      /^INVALID_REQUEST invalid session path/,
    );
    assert.match(
      code(() => parseCpEnd('bad id:x')),
      /^INVALID_REQUEST "bad id:x" is not ID:PATH .*\.\/bad id:x/,
    );
    assert.match(
      code(() => parseCpEnd('')),
      /^INVALID_REQUEST an empty path/,
    );
  });

  test('an artifacts entry lands below the copied path, never outside the target', () => {
    assert.equal(relativeEntry('d/a', 'd'), 'a');
    assert.equal(relativeEntry('d/e/b', 'd'), 'e/b');
    assert.equal(relativeEntry('d', 'd'), '');
    assert.equal(relativeEntry('a/b', ''), 'a/b');
    assert.equal(relativeEntry('dx/a', 'd'), undefined, 'a sibling that shares the prefix');
    assert.equal(relativeEntry('x/a', 'd'), undefined);
    for (const name of ['../a', 'd/../../a', '/etc/passwd', 'a\0b'])
      assert.equal(relativeEntry(name, ''), undefined, name);
  });
});

describe('request bodies', () => {
  test('create: the flags as POST /sessions fields; nothing not given', () => {
    assert.deepEqual(createBody({}, {}), {});
    assert.deepEqual(
      createBody(
        {
          template: 'python',
          ttl: '1800',
          'idle-timeout': '60',
          timeout: '30',
          env: ['A=1', 'B=x=y'],
          secret: ['KEY=v', 'FROM_ENV'],
          memory: '256m',
          cpus: '0.5',
          pids: '64',
          workspace: '128Mi',
        },
        { FROM_ENV: 'secret value' },
      ),
      {
        template: 'python',
        ttlSeconds: 1800,
        idleTimeoutSeconds: 60,
        timeoutSeconds: 30,
        resources: { memory: '256m', cpu: '0.5', pids: 64, ephemeralStorage: '128Mi' },
        env: [
          { name: 'A', value: '1' },
          { name: 'B', value: 'x=y' },
        ],
        secrets: [
          { name: 'KEY', value: 'v' },
          { name: 'FROM_ENV', value: 'secret value' },
        ],
      },
    );
  });

  test('create: bad numbers, NAME=VALUE and a secret not in the environment are usage errors', () => {
    assert.match(
      code(() => createBody({ ttl: '1h' }, {})),
      /^INVALID_REQUEST --ttl expects a positive whole number, got "1h"/,
    );
    assert.match(
      code(() => createBody({ env: ['=1'] }, {})),
      /^INVALID_REQUEST --env expects NAME=VALUE/,
    );
    assert.match(
      code(() => createBody({ secret: ['NOPE'] }, {})),
      /^INVALID_REQUEST --secret NOPE: no variable NOPE/,
    );
  });

  test('exec: argv after --, or --shell, with env, cwd, timeout, background and stdin', () => {
    assert.deepEqual(execBody({}, ['python', 'a.py'], undefined), { command: ['python', 'a.py'] });
    assert.deepEqual(
      execBody(
        { shell: 'make', env: ['A=1'], cwd: 'src', timeout: '5', background: true },
        undefined,
        'input',
      ),
      {
        shell: 'make',
        env: [{ name: 'A', value: '1' }],
        cwd: 'src',
        timeoutSeconds: 5,
        background: true,
        stdin: 'input',
      },
    );
    assert.match(
      code(() => execBody({ shell: 'x' }, ['y'], undefined)),
      /give either -- ARGV or --shell, not both/,
    );
    assert.match(
      code(() => execBody({}, undefined, undefined)),
      /nothing to run/,
    );
    assert.match(
      code(() => execBody({}, [], undefined)),
      /nothing to run/,
    );
  });

  test('the session id: exactly one before --', () => {
    assert.equal(sessionIdOf(['ses-1'], 'exec'), 'ses-1');
    assert.match(
      code(() => sessionIdOf([], 'exec')),
      /exec needs a session ID/,
    );
    assert.match(
      code(() => sessionIdOf(['ses-1', 'ls'], 'exec')),
      /unexpected "ls": put the command after --/,
    );
  });
});

describe('the gateway address and token', () => {
  const config = (host = '127.0.0.1', port = 8080, token?: string) => ({
    server: { host, port } as never,
    auth: { token, tokens: [] } as never,
  });

  test('--url, else SANDPIT_URL, else where `sandpit serve` binds by the config', () => {
    assert.equal(gatewayTarget({}, {}, config()).url.href, 'http://127.0.0.1:8080/');
    assert.equal(gatewayTarget({}, { SANDPIT_URL: 'http://gw:9000' }, config()).url.href, 'http://gw:9000/');
    assert.equal(
      gatewayTarget({ url: 'https://gw.example/sandpit' }, { SANDPIT_URL: 'http://x:1' }, config()).url.href,
      'https://gw.example/sandpit/',
    );
  });

  test('a wildcard bind is reached on loopback; IPv6 in brackets; port 0 is no address', () => {
    assert.equal(defaultGatewayUrl({ host: '0.0.0.0', port: 8081 }), 'http://127.0.0.1:8081');
    assert.equal(defaultGatewayUrl({ host: '::', port: 8081 }), 'http://[::1]:8081');
    assert.equal(defaultGatewayUrl({ host: 'fd00::5', port: 80 }), 'http://[fd00::5]:80');
    assert.match(
      code(() => defaultGatewayUrl({ host: '127.0.0.1', port: 0 })),
      /server.port is 0/,
    );
  });

  test('the token: --token over the config (MCP_AUTH_TOKEN sets auth.token)', () => {
    assert.equal(gatewayTarget({}, {}, config('127.0.0.1', 8080, 'from-config')).token, 'from-config');
    assert.equal(gatewayTarget({ token: 'flag' }, {}, config('127.0.0.1', 8080, 'c')).token, 'flag');
    assert.equal(gatewayTarget({}, {}, config()).token, undefined);
  });

  test('a URL that is not http(s), or carries credentials or a query, is refused', () => {
    assert.match(
      code(() => gatewayTarget({ url: 'ftp://x' }, {}, config())),
      /--url expects an http:\/\/ or https:\/\/ URL/,
    );
    assert.match(
      code(() => gatewayTarget({ url: 'nope' }, {}, config())),
      /--url expects a URL like/,
    );
    assert.match(
      code(() => gatewayTarget({ url: 'http://u:p@x' }, {}, config())),
      /takes no credentials or query/,
    );
    assert.match(
      code(() => gatewayTarget({}, { SANDPIT_URL: 'http://x/?token=1' }, config())),
      /SANDPIT_URL takes no/,
    );
  });
});

describe("the gateway's refusals as errors", () => {
  test('the error JSON keeps its code, message, hint and violations (so the exit code is the code’s)', () => {
    const body = JSON.stringify({
      error: {
        code: 'NOT_FOUND',
        message: 'no session ses-x',
        hint: 'list them',
        violations: [{ field: 'id', message: 'unknown' }],
      },
    });
    const e = errorFromAnswer(404, body, true);
    assert.equal(e.code, 'NOT_FOUND');
    assert.equal(e.exitCode, 66);
    assert.equal(e.message, 'no session ses-x');
    assert.equal(e.hint, 'list them');
    assert.deepEqual(e.violations, [{ field: 'id', message: 'unknown' }]);
  });

  test('an unknown code or a body that is not the error JSON falls back on the status', () => {
    assert.equal(errorFromAnswer(429, '{"error":{"code":"NEW_CODE","message":"m"}}', true).code, 'BUSY');
    const html = errorFromAnswer(502, '<html>bad gateway</html>', true);
    assert.equal(html.code, 'BACKEND_ERROR');
    assert.equal(html.message, 'the gateway answered HTTP 502');
  });

  test('a 401 without a token says how to give one', () => {
    const body = '{"error":{"code":"UNAUTHORIZED","message":"missing Authorization header"}}';
    assert.match(errorFromAnswer(401, body, false).hint ?? '', /set MCP_AUTH_TOKEN .* or pass --token/);
    assert.equal(errorFromAnswer(401, body, true).hint, undefined);
  });

  test('nothing listening: GATEWAY_UNAVAILABLE (exit 69), naming the address and `sandpit serve`', async () => {
    // A port that was free a moment ago: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const client = new GatewayClient({
      url: new URL(`http://127.0.0.1:${port}/`),
      token: 'secret-token-value',
    });
    const e = await client.call('GET', 'sessions').then(
      () => assert.fail('answered'),
      (err: unknown) => err as AppError,
    );
    assert.equal(e.code, 'GATEWAY_UNAVAILABLE');
    assert.equal(e.exitCode, 69);
    assert.equal(e.message, `cannot reach the sandpit gateway at http://127.0.0.1:${port} (ECONNREFUSED)`);
    assert.match(e.hint ?? '', /sandpit serve/);
    assert.ok(!`${e.message}${e.hint}`.includes('secret-token-value'), 'the token is never shown');
    assert.equal(
      unreachable(new URL('http://h:2/'), new Error('boom')).message,
      'cannot reach the sandpit gateway at http://h:2 (boom)',
    );
  });

  test('the WebSocket: the exit message is the result or the error; a 4000+status close names the status', () => {
    const err = parseExit(Buffer.from('{"error":{"code":"BUSY","message":"busy, retry later"}}'));
    assert.ok(err instanceof AppError);
    assert.equal(err.code, 'BUSY');
    assert.ok(parseExit(Buffer.from('garbage')) instanceof AppError);
    assert.equal(closeError(4404, 'NOT_FOUND').code, 'NOT_FOUND');
    assert.equal(closeError(4400, '').code, 'INVALID_REQUEST');
    assert.equal(closeError(1006, '').code, 'BACKEND_ERROR');
    assert.match(closeError(1006, '').message, /closed \(1006\) before the command ended/);
  });
});

describe('output', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  const session = (over: Partial<Session>): Session =>
    ({
      id: 'ses-0123456789abcdef',
      state: 'Ready',
      image: 'sandpit/python:3.11',
      template: 'python',
      createdAt: '2026-01-01T11:55:00Z',
      expiresAt: '2026-01-01T12:55:00Z',
      idleExpiresAt: '2026-01-01T12:09:00Z',
      execs: 3,
      ...over,
    }) as Session;

  test('ages read like kubectl’s', () => {
    assert.deepEqual(
      [0, 45_000, 12 * 60_000, 3_600_000 + 5 * 60_000, 20 * 3_600_000, 3 * 86_400_000].map(span),
      ['0s', '45s', '12m', '1h5m', '20h', '3d'],
    );
  });

  test('ls: id, state (with the reason once ended), template or image, age, the sooner expiry, execs', () => {
    const text = sessionTable(
      [
        session({}),
        session({
          id: 'ses-2',
          template: undefined,
          image: 'python:3.11',
          idleExpiresAt: '2026-01-01T13:30:00Z',
        }),
        session({ id: 'ses-3', state: 'Expired', reason: 'IdleExpired', execs: 0 }),
      ],
      now,
    );
    assert.equal(
      text,
      [
        'ID                    STATE                  TEMPLATE     AGE  EXPIRES       EXECS',
        'ses-0123456789abcdef  Ready                  python       5m   in 9m (idle)  3',
        'ses-2                 Ready                  python:3.11  5m   in 55m        3',
        'ses-3                 Expired (IdleExpired)  python       5m   -             0',
        '',
      ].join('\n'),
    );
  });

  test('logs: each exec introduced by its id, command as a shell reads it, how it ended, duration', () => {
    const entry = {
      execId: 'exec-1',
      argv: ['sh', '-c', "echo 'hi there'"],
      background: true,
      result: {
        phase: 'Failed',
        reason: 'Error',
        exitCode: 3,
        durationMs: 41.6,
        finishedAt: '2026-01-01T12:00:00Z',
      },
    } as ExecLogEntry;
    assert.equal(
      execHeading(entry),
      `== exec-1  $ sh -c 'echo '\\''hi there'\\'''  exit 3 (Failed/Error)  42ms  background  2026-01-01T12:00:00Z\n`,
    );
    const running = {
      ...entry,
      argv: [],
      result: { phase: 'Running', exitCode: null, durationMs: 5 },
    } as never;
    assert.equal(execHeading(running), '== exec-1  running  5ms  background\n');
  });
});

describe('usage', () => {
  test('sandpit sessions --help lists the commands; each command has its own --help', () => {
    const top = sandpit(['sessions', '--help']);
    assert.equal(top.code, 0, top.stderr);
    for (const name of ['create', 'ls', 'exec', 'cp', 'shell', 'logs', 'rm']) {
      assert.match(top.stdout, new RegExp(`^  ${name} `, 'm'));
      const own = sandpit(['sessions', name, '--help']);
      assert.equal(own.code, 0, own.stderr);
      assert.match(own.stdout, new RegExp(`^usage: sandpit sessions ${name}`));
      assert.match(own.stdout, /--url URL/);
    }
  });

  test('an unknown subcommand or option, and a missing id, are usage errors (64) before any request', () => {
    const env = { SANDPIT_URL: 'http://127.0.0.1:9' };
    for (const argv of [
      ['sessions', 'launch'],
      ['sessions', 'ls', '--bogus'],
      ['sessions', 'exec'],
      ['sessions', 'cp', 'a'],
    ]) {
      const r = sandpit(argv, env);
      assert.equal(r.code, 64, `${argv.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^sandpit: /);
      assert.doesNotMatch(r.stderr, /cannot reach/);
    }
  });
});

describe('the CLI over the real HTTP app (in-memory sessions)', () => {
  const TOKEN = 'cli-admin-token-0123';
  const OTHER = 'cli-other-token-0123';
  let gateway: MemoryGateway;
  before(async () => {
    gateway = await serveMemoryGateway({ token: TOKEN, other: OTHER });
  });
  after(() => gateway.close());

  const cli = (args: string[], token = TOKEN) =>
    sandpitAsync(['sessions', ...args], { SANDPIT_URL: gateway.url, MCP_AUTH_TOKEN: token });

  test('create prints the id; exec streams the output (NDJSON) and passes its exit on; logs, ls and rm parse what the gateway sends', async () => {
    const created = await cli(['create', '--template', 'python', '--ttl', '120']);
    assert.equal(created.code, 0, created.stderr);
    const id = created.stdout.trim();
    assert.match(id, /^ses-[0-9a-f]{16}$/);

    const exec = await cli(['exec', id, '--', 'echo', 'streamed']);
    assert.equal(exec.code, 0, exec.stderr);
    assert.equal(exec.stdout, 'echo streamed\n', 'the in-memory sandbox answers its argv');

    const json = await cli(['exec', id, '--json', '--', 'true']);
    assert.equal(json.code, 0, json.stderr);
    assert.equal((JSON.parse(json.stdout) as { phase: string }).phase, 'Succeeded');

    const logs = await cli(['logs', id, '--json']);
    assert.equal(logs.code, 0, logs.stderr);
    assert.deepEqual(
      (JSON.parse(logs.stdout) as { execs: { argv: string[] }[] }).execs.map((e) => e.argv),
      [['echo', 'streamed'], ['true']],
    );

    const ls = await cli(['ls']);
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stdout, new RegExp(`^${id}\\s+Ready\\s+python\\s+\\d+s\\s+in \\d+m\\s+2$`, 'm'));

    const foreign = await cli(['logs', id], OTHER);
    assert.equal(foreign.code, 66, "another token's session is not found");
    assert.match(foreign.stderr, new RegExp(`^sandpit: no session ${id}\\n`));

    const rm = await cli(['rm', id, 'ses-nope', '--json']);
    assert.equal(rm.code, 66, 'the id that failed gives the exit code');
    assert.match(rm.stderr, /^sandpit: no session ses-nope$/m);
    const ended = JSON.parse(rm.stdout) as { sessions: { id: string; state: string }[] };
    assert.deepEqual(
      ended.sessions.map((s) => [s.id, s.state]),
      [[id, 'Deleted']],
    );

    const after = await cli(['exec', id, '--', 'true']);
    assert.notEqual(after.code, 0, 'an ended session runs nothing');
    assert.match(after.stderr, /^sandpit: /);
  });

  test('a wrong token is refused with 77, and the token never shows', async () => {
    const r = await cli(['ls'], 'wrong-token-0123456789');
    assert.equal(r.code, 77, r.stderr);
    assert.ok(!r.stderr.includes('wrong-token-0123456789'));
  });
});
