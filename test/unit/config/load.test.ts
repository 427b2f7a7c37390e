import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  configFields,
  configWarnings,
  egressSummary,
  envNameFor,
  loadConfig,
  SEED_ENV,
} from '../../../src/config/load.js';
import type { Config } from '../../../src/config/schema.js';
import { AppError } from '../../../src/shared/errors.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
const dir = mkdtempSync(join(tmpdir(), 'sandpit-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));

let fileNo = 0;
function file(text: string, ext = 'yaml'): string {
  const path = join(dir, `config-${fileNo++}.${ext}`);
  writeFileSync(path, text);
  return path;
}

function get(config: Config, field: string): unknown {
  return field.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], config);
}

/** Loads, expecting CONFIG_INVALID; returns the message. */
function configError(options: Parameters<typeof loadConfig>[0]): string {
  let caught: unknown;
  try {
    loadConfig(options);
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof AppError, `expected an AppError, got ${String(caught)}`);
  assert.equal(caught.code, 'CONFIG_INVALID');
  return caught.message;
}

describe('loadConfig defaults', () => {
  test('no file, no env: the documented defaults', () => {
    const c = loadConfig({ env: {} });
    assert.equal(c.server.port, 8080);
    assert.equal(c.server.host, '127.0.0.1');
    assert.equal(c.server.stateless, false);
    assert.equal(c.auth.token, undefined);
    assert.deepEqual(c.auth.tokens, []);
    assert.equal(c.sandbox.backend, 'docker');
    assert.equal(c.sandbox.imageAllowlist, undefined);
    assert.equal(c.sandbox.maxCpu, 1000);
    assert.equal(c.sandbox.maxMemory, 512 * MiB);
    assert.equal(c.sandbox.maxPids, 128);
    assert.equal(c.sandbox.timeoutSeconds, 30);
    assert.equal(c.sandbox.disableNetwork, true);
    assert.equal(c.sandbox.runtime, undefined);
    assert.equal(c.docker.socketPath, '/var/run/docker.sock');
    assert.deepEqual(c.pool, {
      enabled: true,
      minIdle: 2,
      maxSize: 8,
      maxTotal: 32,
      maxIdleSeconds: 300,
      maxStarting: 4,
      checkIntervalSeconds: 10,
      prewarm: [],
      prewarmSessions: [],
    });
    assert.deepEqual(c.audit, {
      enabled: true,
      maxBytes: 100 * MiB,
      maxFiles: 5,
      flushIntervalMs: 100,
      commandPreview: true,
    });
    assert.equal(c.logging.level, 'info');
  });

  test('loadConfig() with no options at all uses an empty environment, not process.env', () => {
    const before = process.env.MCP_PORT;
    process.env.MCP_PORT = '1234';
    try {
      assert.equal(loadConfig().server.port, 8080);
    } finally {
      if (before === undefined) delete process.env.MCP_PORT;
      else process.env.MCP_PORT = before;
    }
  });
});

describe('seed environment variables', () => {
  test('SEED_ENV maps exactly the seven documented variables', () => {
    assert.deepEqual(SEED_ENV, {
      MCP_PORT: 'server.port',
      MCP_AUTH_TOKEN: 'auth.token',
      SANDBOX_IMAGE_ALLOWLIST: 'sandbox.imageAllowlist',
      MAX_CONTAINER_CPU: 'sandbox.maxCpu',
      MAX_CONTAINER_MEMORY: 'sandbox.maxMemory',
      CONTAINER_TIMEOUT_SECONDS: 'sandbox.timeoutSeconds',
      DISABLE_NETWORK: 'sandbox.disableNetwork',
    });
  });

  const cases: { env: Record<string, string>; field: string; want: unknown }[] = [
    { env: { MCP_PORT: '9000' }, field: 'server.port', want: 9000 },
    { env: { MCP_PORT: ' 9001 ' }, field: 'server.port', want: 9001 },
    { env: { MCP_PORT: '0' }, field: 'server.port', want: 0 },
    { env: { MCP_AUTH_TOKEN: 's3cret-token-value' }, field: 'auth.token', want: 's3cret-token-value' },
    {
      env: { SANDBOX_IMAGE_ALLOWLIST: 'python:3.11' },
      field: 'sandbox.imageAllowlist',
      want: ['python:3.11'],
    },
    {
      env: { SANDBOX_IMAGE_ALLOWLIST: 'python:3.11, sandpit/*,,node:18 ' },
      field: 'sandbox.imageAllowlist',
      want: ['python:3.11', 'sandpit/*', 'node:18'],
    },
    { env: { MAX_CONTAINER_CPU: '2' }, field: 'sandbox.maxCpu', want: 2000 },
    { env: { MAX_CONTAINER_CPU: '0.5' }, field: 'sandbox.maxCpu', want: 500 },
    { env: { MAX_CONTAINER_CPU: '250m' }, field: 'sandbox.maxCpu', want: 250 },
    { env: { MAX_CONTAINER_CPU: '1.25' }, field: 'sandbox.maxCpu', want: 1250 },
    { env: { MAX_CONTAINER_MEMORY: '512m' }, field: 'sandbox.maxMemory', want: 512 * MiB },
    { env: { MAX_CONTAINER_MEMORY: '256m' }, field: 'sandbox.maxMemory', want: 256 * MiB },
    { env: { MAX_CONTAINER_MEMORY: '1g' }, field: 'sandbox.maxMemory', want: GiB },
    { env: { MAX_CONTAINER_MEMORY: '2G' }, field: 'sandbox.maxMemory', want: 2 * GiB },
    { env: { MAX_CONTAINER_MEMORY: '768Mi' }, field: 'sandbox.maxMemory', want: 768 * MiB },
    { env: { MAX_CONTAINER_MEMORY: '1048576' }, field: 'sandbox.maxMemory', want: MiB },
    { env: { MAX_CONTAINER_MEMORY: '64k' }, field: 'sandbox.maxMemory', want: 64 * 1024 },
    { env: { CONTAINER_TIMEOUT_SECONDS: '45' }, field: 'sandbox.timeoutSeconds', want: 45 },
    { env: { CONTAINER_TIMEOUT_SECONDS: '1' }, field: 'sandbox.timeoutSeconds', want: 1 },
    { env: { CONTAINER_TIMEOUT_SECONDS: '86400' }, field: 'sandbox.timeoutSeconds', want: 86400 },
    { env: { DISABLE_NETWORK: 'true' }, field: 'sandbox.disableNetwork', want: true },
    { env: { DISABLE_NETWORK: 'false' }, field: 'sandbox.disableNetwork', want: false },
    { env: { DISABLE_NETWORK: 'FALSE' }, field: 'sandbox.disableNetwork', want: false },
    { env: { DISABLE_NETWORK: '0' }, field: 'sandbox.disableNetwork', want: false },
    { env: { DISABLE_NETWORK: 'no' }, field: 'sandbox.disableNetwork', want: false },
    { env: { DISABLE_NETWORK: 'off' }, field: 'sandbox.disableNetwork', want: false },
    { env: { DISABLE_NETWORK: '1' }, field: 'sandbox.disableNetwork', want: true },
    { env: { DISABLE_NETWORK: 'Yes' }, field: 'sandbox.disableNetwork', want: true },
    { env: { DISABLE_NETWORK: ' on ' }, field: 'sandbox.disableNetwork', want: true },
  ];
  for (const { env, field, want } of cases) {
    test(`${Object.entries(env)[0]!.join('=')} sets ${field} to ${JSON.stringify(want)}`, () => {
      const c = loadConfig({ env });
      assert.deepEqual(get(c, field), want);
    });
  }

  test('an empty variable counts as unset', () => {
    const c = loadConfig({ env: { MCP_PORT: '', MAX_CONTAINER_MEMORY: '', DISABLE_NETWORK: '' } });
    assert.equal(c.server.port, 8080);
    assert.equal(c.sandbox.maxMemory, 512 * MiB);
    assert.equal(c.sandbox.disableNetwork, true);
  });

  test('all seven at once, the way the seed documents them', () => {
    const c = loadConfig({
      env: {
        MCP_PORT: '8765',
        MCP_AUTH_TOKEN: 'a-long-enough-token',
        SANDBOX_IMAGE_ALLOWLIST: 'python:3.11,node:18',
        MAX_CONTAINER_CPU: '1',
        MAX_CONTAINER_MEMORY: '512m',
        CONTAINER_TIMEOUT_SECONDS: '30',
        DISABLE_NETWORK: 'true',
      },
    });
    assert.equal(c.server.port, 8765);
    assert.equal(c.auth.token, 'a-long-enough-token');
    assert.deepEqual(c.sandbox.imageAllowlist, ['python:3.11', 'node:18']);
    assert.equal(c.sandbox.maxCpu, 1000);
    assert.equal(c.sandbox.maxMemory, 512 * MiB);
    assert.equal(c.sandbox.timeoutSeconds, 30);
    assert.equal(c.sandbox.disableNetwork, true);
  });
});

describe('YAML and JSON config files', () => {
  const yamlCases: { yaml: string; field: string; want: unknown }[] = [
    { yaml: 'server:\n  port: 9100\n', field: 'server.port', want: 9100 },
    { yaml: 'server:\n  port: "9101"\n', field: 'server.port', want: 9101 },
    { yaml: 'auth:\n  token: file-token-1234\n', field: 'auth.token', want: 'file-token-1234' },
    {
      yaml: 'sandbox:\n  imageAllowlist:\n    - python:3.11\n    - sandpit/*\n',
      field: 'sandbox.imageAllowlist',
      want: ['python:3.11', 'sandpit/*'],
    },
    {
      yaml: 'sandbox:\n  imageAllowlist: "python:3.11, node:18"\n',
      field: 'sandbox.imageAllowlist',
      want: ['python:3.11', 'node:18'],
    },
    { yaml: 'sandbox:\n  maxCpu: 2\n', field: 'sandbox.maxCpu', want: 2000 },
    { yaml: 'sandbox:\n  maxCpu: 0.5\n', field: 'sandbox.maxCpu', want: 500 },
    { yaml: 'sandbox:\n  maxCpu: 1500m\n', field: 'sandbox.maxCpu', want: 1500 },
    { yaml: 'sandbox:\n  maxMemory: 512m\n', field: 'sandbox.maxMemory', want: 512 * MiB },
    { yaml: 'sandbox:\n  maxMemory: 1g\n', field: 'sandbox.maxMemory', want: GiB },
    { yaml: 'sandbox:\n  maxMemory: 256Mi\n', field: 'sandbox.maxMemory', want: 256 * MiB },
    { yaml: 'sandbox:\n  maxMemory: 134217728\n', field: 'sandbox.maxMemory', want: 128 * MiB },
    { yaml: 'sandbox:\n  timeoutSeconds: 90\n', field: 'sandbox.timeoutSeconds', want: 90 },
    { yaml: 'sandbox:\n  timeoutSeconds: "12"\n', field: 'sandbox.timeoutSeconds', want: 12 },
    { yaml: 'sandbox:\n  disableNetwork: false\n', field: 'sandbox.disableNetwork', want: false },
    { yaml: 'sandbox:\n  disableNetwork: true\n', field: 'sandbox.disableNetwork', want: true },
    { yaml: 'sandbox:\n  disableNetwork: "off"\n', field: 'sandbox.disableNetwork', want: false },
    { yaml: 'logging:\n  level: debug\n', field: 'logging.level', want: 'debug' },
    { yaml: 'logging:\n  level: silent\n', field: 'logging.level', want: 'silent' },
  ];
  for (const { yaml, field, want } of yamlCases) {
    test(`YAML ${yaml.replace(/\n\s*/g, ' ').trim()} sets ${field}`, () => {
      assert.deepEqual(get(loadConfig({ configPath: file(yaml) }), field), want);
    });
  }

  test('a JSON file sets every seed key', () => {
    const path = file(
      JSON.stringify({
        server: { port: 7000 },
        auth: { token: 'json-token-abcdef' },
        sandbox: {
          imageAllowlist: ['python:3.11'],
          maxCpu: '750m',
          maxMemory: '384m',
          timeoutSeconds: 20,
          disableNetwork: false,
        },
        logging: { level: 'warn' },
      }),
      'json',
    );
    const c = loadConfig({ configPath: path });
    assert.equal(c.server.port, 7000);
    assert.equal(c.auth.token, 'json-token-abcdef');
    assert.deepEqual(c.sandbox.imageAllowlist, ['python:3.11']);
    assert.equal(c.sandbox.maxCpu, 750);
    assert.equal(c.sandbox.maxMemory, 384 * MiB);
    assert.equal(c.sandbox.timeoutSeconds, 20);
    assert.equal(c.sandbox.disableNetwork, false);
    assert.equal(c.logging.level, 'warn');
  });

  test('SANDPIT_CONFIG names the file when no configPath is given', () => {
    const path = file('server:\n  port: 7100\n');
    assert.equal(loadConfig({ env: { SANDPIT_CONFIG: path } }).server.port, 7100);
  });

  test('configPath wins over SANDPIT_CONFIG', () => {
    const a = file('server:\n  port: 7201\n');
    const b = file('server:\n  port: 7202\n');
    assert.equal(loadConfig({ configPath: a, env: { SANDPIT_CONFIG: b } }).server.port, 7201);
  });

  test('an empty file, or one holding only a comment, means all defaults', () => {
    assert.equal(loadConfig({ configPath: file('') }).server.port, 8080);
    assert.equal(loadConfig({ configPath: file('# nothing here\n') }).sandbox.maxMemory, 512 * MiB);
  });

  test('fields a file leaves out keep their defaults', () => {
    const c = loadConfig({ configPath: file('sandbox:\n  maxCpu: 2\n') });
    assert.equal(c.sandbox.maxCpu, 2000);
    assert.equal(c.sandbox.maxMemory, 512 * MiB);
    assert.equal(c.server.port, 8080);
  });

  test('auth.tokens from YAML, with a hashed token and scopes', () => {
    const sha = 'a'.repeat(64);
    const c = loadConfig({
      configPath: file(
        `auth:\n  tokens:\n    - name: alice\n      token: alice-token-1\n      templates: [python]\n` +
          `    - name: bob\n      tokenSha256: ${sha}\n      images: "python:3.11, node:18"\n      maxConcurrentRuns: 2\n`,
      ),
    });
    assert.deepEqual(c.auth.tokens, [
      { name: 'alice', token: 'alice-token-1', templates: ['python'] },
      { name: 'bob', tokenSha256: sha, images: ['python:3.11', 'node:18'], maxConcurrentRuns: 2 },
    ]);
  });
});

describe('SANDPIT_* variables', () => {
  test('envNameFor turns dotted camelCase into SANDPIT_UPPER_SNAKE', () => {
    const cases: [string, string][] = [
      ['sandbox.maxMemory', 'SANDPIT_SANDBOX_MAX_MEMORY'],
      ['server.port', 'SANDPIT_SERVER_PORT'],
      ['auth.token', 'SANDPIT_AUTH_TOKEN'],
      ['sandbox.imageAllowlist', 'SANDPIT_SANDBOX_IMAGE_ALLOWLIST'],
      ['sandbox.timeoutSeconds', 'SANDPIT_SANDBOX_TIMEOUT_SECONDS'],
      ['docker.socketPath', 'SANDPIT_DOCKER_SOCKET_PATH'],
      ['logging.level', 'SANDPIT_LOGGING_LEVEL'],
    ];
    for (const [field, name] of cases) assert.equal(envNameFor(field), name);
  });

  test('configFields lists every leaf of the schema, and no objects', () => {
    assert.deepEqual(configFields().sort(), [
      'audit.commandPreview',
      'audit.enabled',
      'audit.file',
      'audit.flushIntervalMs',
      'audit.maxBytes',
      'audit.maxFiles',
      'auth.oauth',
      'auth.token',
      'auth.tokens',
      'docker.runFilesBytes',
      'docker.socketPath',
      'kubernetes.allowedRuntimeClasses',
      'kubernetes.egress.enabled',
      'kubernetes.egress.keyFile',
      'kubernetes.egress.listenHost',
      'kubernetes.egress.namespace',
      'kubernetes.egress.namespaceLabels',
      'kubernetes.egress.networkPolicyEnforced',
      'kubernetes.egress.podLabels',
      'kubernetes.egress.port',
      'kubernetes.egress.probePort',
      'kubernetes.egress.service',
      'kubernetes.gateway.kubeconfig',
      'kubernetes.gateway.namespace',
      'kubernetes.gateway.pickupTimeoutSeconds',
      'kubernetes.gateway.ttlSecondsAfterFinished',
      'kubernetes.operator.cpuRequest',
      'kubernetes.operator.gvisorRuntimeClasses',
      'kubernetes.operator.imagePullPolicy',
      'kubernetes.operator.leaderElection',
      'kubernetes.operator.leaseDurationSeconds',
      'kubernetes.operator.leaseName',
      'kubernetes.operator.leaseNamespace',
      'kubernetes.operator.memoryRequest',
      'kubernetes.operator.namespaces',
      'kubernetes.operator.networkPolicyEnforced',
      'kubernetes.operator.outputReadBytes',
      'kubernetes.operator.outputTailBytes',
      'kubernetes.operator.probeHost',
      'kubernetes.operator.probePort',
      'kubernetes.operator.renewDeadlineSeconds',
      'kubernetes.operator.resyncSeconds',
      'kubernetes.operator.retryPeriodSeconds',
      'kubernetes.operator.seccompProfile',
      'kubernetes.operator.startGraceSeconds',
      'kubernetes.operator.ttlSecondsAfterFinished',
      'kubernetes.operator.watchTimeoutSeconds',
      'kubernetes.operator.workers',
      'kubernetes.pendingTimeoutSeconds',
      'kubernetes.runtimeClassName',
      'logging.level',
      'oci.imageRefreshSeconds',
      'oci.rootfsDir',
      'oci.runDir',
      'oci.runcPath',
      'oci.runscPath',
      'pool.checkIntervalSeconds',
      'pool.enabled',
      'pool.maxIdleSeconds',
      'pool.maxSize',
      'pool.maxStarting',
      'pool.maxTotal',
      'pool.minIdle',
      'pool.prewarm',
      'pool.prewarmSessions',
      'sandbox.allowedRuntimes',
      'sandbox.backend',
      'sandbox.disableNetwork',
      'sandbox.egress.allow',
      'sandbox.egress.connectTimeoutSeconds',
      'sandbox.egress.idleTimeoutSeconds',
      'sandbox.egress.internalCidrs',
      'sandbox.egress.maxBytes',
      'sandbox.egress.maxConnections',
      'sandbox.egress.socketDir',
      'sandbox.imageAllowlist',
      'sandbox.maxConcurrentRuns',
      'sandbox.maxCpu',
      'sandbox.maxDownloadBytes',
      'sandbox.maxMemory',
      'sandbox.maxOutputBytes',
      'sandbox.maxPids',
      'sandbox.maxQueuedRuns',
      'sandbox.maxRequestBytes',
      'sandbox.maxWorkspace',
      'sandbox.outputBytesPerMinute',
      'sandbox.runsPerMinute',
      'sandbox.runtime',
      'sandbox.timeoutSeconds',
      'sandbox.tmpSize',
      'server.allowedHosts',
      'server.headersTimeoutSeconds',
      'server.host',
      'server.instanceId',
      'server.maxRequestsPerSecond',
      'server.maxSessions',
      'server.maxSessionsPerPrincipal',
      'server.port',
      'server.requestTimeoutSeconds',
      'server.runHistoryBytes',
      'server.seedTools',
      'server.sessionIdleSeconds',
      'server.stateless',
      'server.unusedSessionSeconds',
      'sessions.idleTimeoutSeconds',
      'sessions.logBytes',
      'sessions.logExecs',
      'sessions.max',
      'sessions.maxExecs',
      'sessions.maxIdleTimeoutSeconds',
      'sessions.maxPerPrincipal',
      'sessions.maxTtlSeconds',
      'sessions.ttlSeconds',
    ]);
  });

  test('envNameFor gives every field a distinct name', () => {
    const names = configFields().map(envNameFor);
    assert.equal(new Set(names).size, names.length);
    for (const n of names) assert.match(n, /^SANDPIT_[A-Z0-9_]+$/);
  });

  /** A text value for every field, and what it must become. */
  const values: Record<string, { text: string; want: unknown }> = {
    'server.port': { text: '9999', want: 9999 },
    'server.host': { text: '0.0.0.0', want: '0.0.0.0' },
    'server.allowedHosts': { text: 'a.example,b.example', want: ['a.example', 'b.example'] },
    'server.stateless': { text: 'true', want: true },
    'server.seedTools': { text: 'false', want: false },
    'server.maxSessions': { text: '10', want: 10 },
    'server.maxSessionsPerPrincipal': { text: '3', want: 3 },
    'server.sessionIdleSeconds': { text: '600', want: 600 },
    'server.unusedSessionSeconds': { text: '5', want: 5 },
    'server.maxRequestsPerSecond': { text: '50', want: 50 },
    'server.headersTimeoutSeconds': { text: '5', want: 5 },
    'server.requestTimeoutSeconds': { text: '60', want: 60 },
    'server.runHistoryBytes': { text: '8Mi', want: 8 * MiB },
    'server.instanceId': { text: '/srv/sandpit', want: '/srv/sandpit' },
    'auth.token': { text: 'env-token-123456', want: 'env-token-123456' },
    'auth.tokens': {
      text: '[{"name":"ci","token":"ci-token-1234","templates":["bash"]}]',
      want: [{ name: 'ci', token: 'ci-token-1234', templates: ['bash'] }],
    },
    'auth.oauth': {
      text: '{"issuer":"https://id.example.com","audience":"https://sandpit.example.com/mcp","jwksUrl":"https://id.example.com/jwks"}',
      want: {
        issuer: 'https://id.example.com',
        audience: 'https://sandpit.example.com/mcp',
        jwksUrl: 'https://id.example.com/jwks',
        requiredScopes: ['sandpit'],
        clockToleranceSeconds: 30,
        namespaces: [],
        claims: {
          templates: 'sandpit_templates',
          images: 'sandpit_images',
          maxConcurrentRuns: 'sandpit_max_concurrent_runs',
          maxSessions: 'sandpit_max_sessions',
          namespace: 'sandpit_namespace',
        },
        defaults: {},
      },
    },
    'sandbox.backend': { text: 'kubernetes', want: 'kubernetes' },
    'sandbox.imageAllowlist': { text: 'python:3.11,sandpit/*', want: ['python:3.11', 'sandpit/*'] },
    'sandbox.maxCpu': { text: '3', want: 3000 },
    'sandbox.maxMemory': { text: '2g', want: 2 * GiB },
    'sandbox.maxPids': { text: '300', want: 300 },
    'sandbox.maxWorkspace': { text: '100m', want: 100 * MiB },
    'sandbox.tmpSize': { text: '32m', want: 32 * MiB },
    'sandbox.timeoutSeconds': { text: '120', want: 120 },
    'sandbox.maxOutputBytes': { text: '64k', want: 64 * 1024 },
    'sandbox.maxRequestBytes': { text: '8m', want: 8 * MiB },
    'sandbox.maxDownloadBytes': { text: '16m', want: 16 * MiB },
    'sandbox.disableNetwork': { text: 'false', want: false },
    'sandbox.egress.allow': {
      text: 'pypi.org,*.example.com:8443,10.0.0.0/24',
      want: ['pypi.org', '*.example.com:8443', '10.0.0.0/24'],
    },
    'sandbox.egress.internalCidrs': {
      text: '10.244.0.0/16,10.96.0.0/12',
      want: ['10.244.0.0/16', '10.96.0.0/12'],
    },
    'sandbox.egress.maxConnections': { text: '8', want: 8 },
    'sandbox.egress.maxBytes': { text: '100m', want: 100 * MiB },
    'sandbox.egress.connectTimeoutSeconds': { text: '5', want: 5 },
    'sandbox.egress.idleTimeoutSeconds': { text: '30', want: 30 },
    'sandbox.egress.socketDir': { text: '/run/sandpit/egress', want: '/run/sandpit/egress' },
    'kubernetes.egress.enabled': { text: 'true', want: true },
    'kubernetes.egress.networkPolicyEnforced': { text: 'true', want: true },
    'kubernetes.egress.service': { text: 'egress', want: 'egress' },
    'kubernetes.egress.namespace': { text: 'sandpit-system', want: 'sandpit-system' },
    'kubernetes.egress.port': { text: '3129', want: 3129 },
    'kubernetes.egress.podLabels': { text: '{"app":"proxy"}', want: { app: 'proxy' } },
    'kubernetes.egress.namespaceLabels': { text: '{"team":"infra"}', want: { team: 'infra' } },
    'kubernetes.egress.keyFile': { text: '/etc/sandpit-egress/key', want: '/etc/sandpit-egress/key' },
    'kubernetes.egress.listenHost': { text: '127.0.0.1', want: '127.0.0.1' },
    'kubernetes.egress.probePort': { text: '9092', want: 9092 },
    'sandbox.runtime': { text: 'runsc', want: 'runsc' },
    'sandbox.allowedRuntimes': { text: 'runc,runsc', want: ['runc', 'runsc'] },
    'sandbox.maxConcurrentRuns': { text: '3', want: 3 },
    'sandbox.maxQueuedRuns': { text: '0', want: 0 },
    'sandbox.runsPerMinute': { text: '30', want: 30 },
    'sandbox.outputBytesPerMinute': { text: '10m', want: 10 * MiB },
    'sessions.max': { text: '4', want: 4 },
    'sessions.maxPerPrincipal': { text: '2', want: 2 },
    'sessions.ttlSeconds': { text: '120', want: 120 },
    'sessions.maxTtlSeconds': { text: '7200', want: 7200 },
    'sessions.idleTimeoutSeconds': { text: '60', want: 60 },
    'sessions.maxIdleTimeoutSeconds': { text: '600', want: 600 },
    'sessions.maxExecs': { text: '4', want: 4 },
    'sessions.logExecs': { text: '10', want: 10 },
    'sessions.logBytes': { text: '64Ki', want: 64 * 1024 },
    'docker.socketPath': { text: '/run/user/1000/docker.sock', want: '/run/user/1000/docker.sock' },
    'docker.runFilesBytes': { text: '256m', want: 256 * MiB },
    'oci.runDir': { text: '/run/sp', want: '/run/sp' },
    'oci.rootfsDir': { text: '/var/cache/sp', want: '/var/cache/sp' },
    'oci.runcPath': { text: '/usr/bin/runc', want: '/usr/bin/runc' },
    'oci.runscPath': { text: '/opt/runsc', want: '/opt/runsc' },
    'oci.imageRefreshSeconds': { text: '5', want: 5 },
    'pool.enabled': { text: 'false', want: false },
    'pool.minIdle': { text: '0', want: 0 },
    'pool.maxSize': { text: '5', want: 5 },
    'pool.maxTotal': { text: '50', want: 50 },
    'pool.maxIdleSeconds': { text: '60', want: 60 },
    'pool.maxStarting': { text: '2', want: 2 },
    'pool.checkIntervalSeconds': { text: '30', want: 30 },
    'pool.prewarm': { text: 'python, bash', want: ['python', 'bash'] },
    'pool.prewarmSessions': { text: 'python', want: ['python'] },
    'kubernetes.operator.namespaces': { text: 'agents, ci', want: ['agents', 'ci'] },
    'kubernetes.runtimeClassName': { text: 'gvisor', want: 'gvisor' },
    'kubernetes.allowedRuntimeClasses': { text: 'gvisor,kata', want: ['gvisor', 'kata'] },
    'kubernetes.operator.imagePullPolicy': { text: 'Never', want: 'Never' },
    'kubernetes.pendingTimeoutSeconds': { text: '30', want: 30 },
    'kubernetes.operator.ttlSecondsAfterFinished': { text: '600', want: 600 },
    'kubernetes.operator.cpuRequest': { text: '50m', want: 50 },
    'kubernetes.operator.memoryRequest': { text: '64Mi', want: 64 * MiB },
    'kubernetes.operator.startGraceSeconds': { text: '5', want: 5 },
    'kubernetes.operator.outputTailBytes': { text: '8k', want: 8192 },
    'kubernetes.operator.outputReadBytes': { text: '2m', want: 2 * MiB },
    'kubernetes.operator.workers': { text: '8', want: 8 },
    'kubernetes.operator.watchTimeoutSeconds': { text: '60', want: 60 },
    'kubernetes.operator.resyncSeconds': { text: '120', want: 120 },
    'kubernetes.operator.leaderElection': { text: 'false', want: false },
    'kubernetes.operator.leaseName': { text: 'sandpit-op', want: 'sandpit-op' },
    'kubernetes.operator.leaseNamespace': { text: 'sandpit-system', want: 'sandpit-system' },
    'kubernetes.operator.leaseDurationSeconds': { text: '20', want: 20 },
    'kubernetes.operator.renewDeadlineSeconds': { text: '5', want: 5 },
    'kubernetes.operator.retryPeriodSeconds': { text: '3', want: 3 },
    'kubernetes.operator.probeHost': { text: '0.0.0.0', want: '0.0.0.0' },
    'kubernetes.operator.probePort': { text: '9090', want: 9090 },
    'kubernetes.gateway.kubeconfig': { text: '/etc/sandpit/kubeconfig', want: '/etc/sandpit/kubeconfig' },
    'kubernetes.gateway.namespace': { text: 'sandpit-runs', want: 'sandpit-runs' },
    'kubernetes.gateway.ttlSecondsAfterFinished': { text: '60', want: 60 },
    'kubernetes.gateway.pickupTimeoutSeconds': { text: '10', want: 10 },
    'audit.enabled': { text: 'false', want: false },
    'audit.file': { text: '/var/log/sandpit/audit.jsonl', want: '/var/log/sandpit/audit.jsonl' },
    'audit.maxBytes': { text: '1k', want: 1024 },
    'audit.maxFiles': { text: '2', want: 2 },
    'audit.flushIntervalMs': { text: '0', want: 0 },
    'audit.commandPreview': { text: 'off', want: false },
    'logging.level': { text: 'trace', want: 'trace' },
    'kubernetes.operator.networkPolicyEnforced': { text: 'true', want: true },
    'kubernetes.operator.seccompProfile': { text: 'RuntimeDefault', want: 'RuntimeDefault' },
    'kubernetes.operator.gvisorRuntimeClasses': { text: 'gvisor,gvisor-kvm', want: ['gvisor', 'gvisor-kvm'] },
  };

  test('the table below covers every field', () => {
    assert.deepEqual(Object.keys(values).sort(), configFields().sort());
  });

  for (const field of configFields()) {
    test(`${envNameFor(field)} sets ${field}`, () => {
      const v = values[field];
      assert.ok(v, `no test value for ${field}`);
      const c = loadConfig({ env: { [envNameFor(field)]: v.text } });
      assert.deepEqual(get(c, field), v.want);
    });
  }
});

describe('precedence: defaults < file < seed env < SANDPIT_*', () => {
  const yaml = 'server:\n  port: 1111\nsandbox:\n  maxMemory: 128m\n  maxCpu: 2\n  timeoutSeconds: 11\n';

  test('file beats defaults', () => {
    const c = loadConfig({ configPath: file(yaml) });
    assert.equal(c.server.port, 1111);
    assert.equal(c.sandbox.maxMemory, 128 * MiB);
  });

  test('seed env beats file', () => {
    const c = loadConfig({ configPath: file(yaml), env: { MCP_PORT: '2222', MAX_CONTAINER_MEMORY: '256m' } });
    assert.equal(c.server.port, 2222);
    assert.equal(c.sandbox.maxMemory, 256 * MiB);
    // untouched file values survive
    assert.equal(c.sandbox.maxCpu, 2000);
    assert.equal(c.sandbox.timeoutSeconds, 11);
  });

  test('SANDPIT_* beats seed env and file', () => {
    const c = loadConfig({
      configPath: file(yaml),
      env: {
        MCP_PORT: '2222',
        SANDPIT_SERVER_PORT: '3333',
        MAX_CONTAINER_MEMORY: '256m',
        SANDPIT_SANDBOX_MAX_MEMORY: '384m',
        CONTAINER_TIMEOUT_SECONDS: '22',
      },
    });
    assert.equal(c.server.port, 3333);
    assert.equal(c.sandbox.maxMemory, 384 * MiB);
    assert.equal(c.sandbox.timeoutSeconds, 22);
    assert.equal(c.sandbox.maxCpu, 2000);
  });

  test('SANDPIT_* beats seed env without a file', () => {
    const c = loadConfig({ env: { DISABLE_NETWORK: 'false', SANDPIT_SANDBOX_DISABLE_NETWORK: 'true' } });
    assert.equal(c.sandbox.disableNetwork, true);
    const d = loadConfig({
      env: { MCP_AUTH_TOKEN: 'seed-token-1234', SANDPIT_AUTH_TOKEN: 'sandpit-token-1234' },
    });
    assert.equal(d.auth.token, 'sandpit-token-1234');
  });

  test('an env value that overrides a bad file value hides the file error', () => {
    const c = loadConfig({ configPath: file('server:\n  port: nope\n'), env: { MCP_PORT: '4444' } });
    assert.equal(c.server.port, 4444);
  });
});

describe('errors', () => {
  const badValues: { env: Record<string, string>; field: string; form: RegExp }[] = [
    { env: { MCP_PORT: 'eighty' }, field: 'server.port', form: /expected a whole number from 0 to 65535/ },
    { env: { MCP_PORT: '70000' }, field: 'server.port', form: /expected a whole number from 0 to 65535/ },
    { env: { MCP_PORT: '-1' }, field: 'server.port', form: /expected a whole number from 0 to 65535/ },
    { env: { MCP_PORT: '80.5' }, field: 'server.port', form: /expected a whole number from 0 to 65535/ },
    {
      env: { MAX_CONTAINER_CPU: 'lots' },
      field: 'sandbox.maxCpu',
      form: /expected a CPU amount like 1, 0\.5 or 500m/,
    },
    { env: { MAX_CONTAINER_CPU: '0' }, field: 'sandbox.maxCpu', form: /expected a CPU amount/ },
    { env: { MAX_CONTAINER_CPU: '-1' }, field: 'sandbox.maxCpu', form: /expected a CPU amount/ },
    {
      env: { MAX_CONTAINER_MEMORY: '512x' },
      field: 'sandbox.maxMemory',
      form: /expected a size like 512m, 1g, 256Mi/,
    },
    { env: { MAX_CONTAINER_MEMORY: '0' }, field: 'sandbox.maxMemory', form: /expected a size like/ },
    { env: { MAX_CONTAINER_MEMORY: 'm512' }, field: 'sandbox.maxMemory', form: /expected a size like/ },
    {
      env: { CONTAINER_TIMEOUT_SECONDS: '30s' },
      field: 'sandbox.timeoutSeconds',
      form: /expected a whole number from 1 to 86400/,
    },
    {
      env: { CONTAINER_TIMEOUT_SECONDS: '0' },
      field: 'sandbox.timeoutSeconds',
      form: /expected a whole number from 1 to 86400/,
    },
    { env: { DISABLE_NETWORK: 'maybe' }, field: 'sandbox.disableNetwork', form: /expected true or false/ },
    {
      env: { SANDPIT_LOGGING_LEVEL: 'loud' },
      field: 'logging.level',
      form: /expected one of fatal, error, warn, info, debug, trace, silent/,
    },
    {
      env: { SANDPIT_SANDBOX_BACKEND: 'podman' },
      field: 'sandbox.backend',
      form: /expected docker, kubernetes or oci/,
    },
    {
      env: { SANDPIT_SANDBOX_RUNTIME: 'Run SC' },
      field: 'sandbox.runtime',
      form: /expected a runtime name like runsc/,
    },
    {
      env: { SANDPIT_SANDBOX_MAX_PIDS: '4' },
      field: 'sandbox.maxPids',
      form: /expected a whole number from 8 to 65536/,
    },
  ];
  for (const { env, field, form } of badValues) {
    const [name, value] = Object.entries(env)[0]!;
    test(`${name}=${value}: names ${field}, the variable, the value and the accepted form`, () => {
      const msg = configError({ env });
      assert.match(msg, /^invalid configuration:/);
      assert.ok(msg.includes(`${field} (from env ${name} = ${JSON.stringify(value)}): `), msg);
      assert.match(msg, form);
    });
  }

  test('a bad file value names the file', () => {
    const path = file('sandbox:\n  maxMemory: lots\n');
    const msg = configError({ configPath: path });
    assert.ok(msg.includes(`sandbox.maxMemory (from file ${path} = "lots"): expected a size like 512m`), msg);
  });

  test('every bad value is reported at once, from file and env alike', () => {
    const path = file('server:\n  port: 99999\nlogging:\n  level: chatty\nsandbox:\n  maxCpu: none\n');
    const msg = configError({
      configPath: path,
      env: { MAX_CONTAINER_MEMORY: 'big', CONTAINER_TIMEOUT_SECONDS: 'soon', DISABLE_NETWORK: 'perhaps' },
    });
    const lines = msg.split('\n').slice(1);
    assert.equal(lines.length, 6, msg);
    for (const f of ['server.port', 'logging.level', 'sandbox.maxCpu']) {
      assert.ok(
        lines.some((l) => l.includes(`${f} (from file ${path}`)),
        `${f} missing: ${msg}`,
      );
    }
    for (const [f, n] of [
      ['sandbox.maxMemory', 'MAX_CONTAINER_MEMORY'],
      ['sandbox.timeoutSeconds', 'CONTAINER_TIMEOUT_SECONDS'],
      ['sandbox.disableNetwork', 'DISABLE_NETWORK'],
    ]) {
      assert.ok(
        lines.some((l) => l.includes(`${f} (from env ${n}`)),
        `${f} missing: ${msg}`,
      );
    }
  });

  test('the error carries a hint and maps to exit code 78', () => {
    let caught: unknown;
    try {
      loadConfig({ env: { MCP_PORT: 'x' } });
    } catch (e) {
      caught = e;
    }
    assert.ok(caught instanceof AppError);
    assert.match(caught.hint ?? '', /`sandpit config` lists every setting/);
    assert.equal(caught.exitCode, 78);
  });

  test('unknown keys are refused, named, with where they came from', () => {
    const path = file('sandbox:\n  maxMemroy: 1g\n  maxCpu: 1\nserverr:\n  port: 1\n');
    const msg = configError({ configPath: path });
    assert.match(msg, /sandbox: unknown setting\(s\) maxMemroy/);
    assert.match(msg, /\(top level\): unknown setting\(s\) serverr/);
    for (const line of msg.split('\n').slice(1)) assert.ok(line.includes(`in file ${path}`), line);
  });

  test('unknown keys inside a token entry are refused', () => {
    const msg = configError({
      configPath: file('auth:\n  tokens:\n    - name: a\n      token: abcdefghij\n      scope: all\n'),
    });
    assert.match(msg, /auth\.tokens\.0: unknown setting\(s\) scope/);
  });

  test('a token entry needs exactly one of token or tokenSha256', () => {
    const both = configError({
      configPath: file(
        `auth:\n  tokens:\n    - name: a\n      token: abcdefghij\n      tokenSha256: ${'b'.repeat(64)}\n`,
      ),
    });
    assert.match(both, /give exactly one of token or tokenSha256/);
    const neither = configError({ configPath: file('auth:\n  tokens:\n    - name: a\n') });
    assert.match(neither, /give exactly one of token or tokenSha256/);
  });

  test('token names tell tokens apart: a duplicate or reserved name is refused, naming the field', () => {
    const tokens = (entries: string) => `auth:\n  token: admin-token-0\n  tokens:\n${entries}`;
    const entry = (name: string, token: string) => `    - name: ${name}\n      token: ${token}\n`;
    const dup = configError({
      configPath: file(tokens(entry('alice', 'alice-token-1') + entry('alice', 'other-token-2'))),
    });
    assert.match(dup, /auth\.tokens\.1\.name .*"alice" is already the name of auth\.tokens\.0/);
    for (const reserved of ['default', 'local']) {
      const msg = configError({ configPath: file(tokens(entry(reserved, 'scoped-token-1'))) });
      assert.match(msg, new RegExp(`auth\\.tokens\\.0\\.name .*"${reserved}" is reserved`));
    }
  });

  test('one token listed twice (as itself, as its digest, or as auth.token) is refused without showing it', () => {
    const sha = createHash('sha256').update('admin-token-0').digest('hex');
    const msg = configError({
      configPath: file(
        'auth:\n  token: admin-token-0\n  tokens:\n' +
          '    - name: a\n      token: shared-token-1\n' +
          '    - name: b\n      token: shared-token-1\n' +
          `    - name: c\n      tokenSha256: ${sha}\n`,
      ),
    });
    assert.match(msg, /auth\.tokens\.1\.token.*the same token as auth\.tokens\.0/);
    assert.match(msg, /auth\.tokens\.2\.tokenSha256.*the same token as auth\.token\b/);
    assert.doesNotMatch(msg, /shared-token-1|admin-token-0/);
  });

  test('unknown SANDPIT_* variables and unrelated variables are ignored', () => {
    const c = loadConfig({ env: { SANDPIT_NOT_A_SETTING: 'x', PATH: '/usr/bin', HOME: '/root' } });
    assert.equal(c.server.port, 8080);
  });

  test('an unreadable file: CONFIG_INVALID naming the path', () => {
    const path = join(dir, 'does-not-exist.yaml');
    const msg = configError({ configPath: path });
    assert.ok(msg.startsWith(`cannot read config file ${path}`), msg);
    assert.match(msg, /ENOENT/);
  });

  test('a directory instead of a file: CONFIG_INVALID naming the path', () => {
    const msg = configError({ configPath: dir });
    assert.ok(msg.startsWith(`cannot read config file ${dir}`), msg);
  });

  test('a file that is not YAML: CONFIG_INVALID naming the path', () => {
    const path = file('server: [1, 2\n');
    const msg = configError({ configPath: path });
    assert.ok(msg.startsWith(`config file ${path} is not valid YAML or JSON`), msg);
  });

  const nonMappings = ['- a\n- b\n', '42\n', 'just a string\n', 'true\n'];
  for (const text of nonMappings) {
    test(`a file holding ${JSON.stringify(text.trim())} is refused as not a mapping`, () => {
      const path = file(text);
      const msg = configError({ configPath: path });
      assert.equal(msg, `config file ${path} must hold a mapping (server:, auth:, sandbox:, …)`);
    });
  }

  test('a section that is not a mapping names the section', () => {
    const msg = configError({ configPath: file('sandbox: 12\n') });
    assert.match(msg, /^ {2}sandbox\b.*expected object/m);
  });
});

describe('secrets are never echoed', () => {
  const secret = 'Sup3rS3cretTok';

  test('a too-short MCP_AUTH_TOKEN: named, value hidden', () => {
    const msg = configError({ env: { MCP_AUTH_TOKEN: 'short' } });
    assert.match(msg, /auth\.token \(from env MCP_AUTH_TOKEN\): expected at least 8 characters/);
    assert.ok(!msg.includes('short"'), msg);
    assert.ok(!msg.includes('= "short'), msg);
  });

  test('a bad auth.token in a file: value hidden', () => {
    const msg = configError({ configPath: file('auth:\n  token: [abc]\n') });
    assert.match(msg, /auth\.token \(from file [^)]*\):/);
    assert.ok(!msg.includes('abc'), msg);
  });

  test('a bad token entry in SANDPIT_AUTH_TOKENS: value hidden', () => {
    const msg = configError({
      env: { SANDPIT_AUTH_TOKENS: `[{"name":"x","token":"${secret.slice(0, 5)}"}]` },
    });
    assert.match(
      msg,
      /auth\.tokens\.0\.token \(from env SANDPIT_AUTH_TOKENS\): expected at least 8 characters/,
    );
    assert.ok(!msg.includes(secret.slice(0, 5)), msg);
  });

  test('SANDPIT_AUTH_TOKENS that is not JSON: value hidden', () => {
    const msg = configError({ env: { SANDPIT_AUTH_TOKENS: `${secret},other` } });
    assert.match(msg, /auth\.tokens \(from env SANDPIT_AUTH_TOKENS\)/);
    assert.ok(!msg.includes(secret), msg);
  });

  test('a token written straight under auth: (auth: <token>) is not echoed', () => {
    const msg = configError({ configPath: file(`auth: ${secret}\n`) });
    assert.match(msg, /^ {2}auth\b/m);
    assert.ok(!msg.includes(secret), msg);
  });

  test('a token written straight under auth.tokens is not echoed', () => {
    const msg = configError({ configPath: file(`auth:\n  tokens: ${secret}\n`) });
    assert.match(msg, /auth\.tokens/);
    assert.ok(!msg.includes(secret), msg);
  });

  test('a YAML syntax error on a token line does not quote the line', () => {
    const path = file(`auth:\n  token: ${secret}: oops\n`);
    const msg = configError({ configPath: path });
    assert.ok(msg.startsWith(`config file ${path} is not valid YAML or JSON`), msg);
    assert.match(msg, /line 2/);
    assert.ok(!msg.includes(secret), msg);
  });

  test('non-secret values are shown (so the operator can see the typo)', () => {
    const msg = configError({ env: { MAX_CONTAINER_MEMORY: '512 megs' } });
    assert.ok(msg.includes('"512 megs"'), msg);
  });
});

describe('configWarnings', () => {
  test('DISABLE_NETWORK=false with an empty ceiling is accepted and warned about', () => {
    const c = loadConfig({ env: { DISABLE_NETWORK: 'false' } });
    assert.equal(c.sandbox.disableNetwork, false);
    const warnings = configWarnings(c);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /DISABLE_NETWORK=false/);
    assert.match(warnings[0]!, /sandbox\.disableNetwork: false/);
    assert.match(warnings[0]!, /sandbox\.egress\.allow is empty/);
    assert.match(warnings[0]!, /no network/);
  });

  test('DISABLE_NETWORK=false with a ceiling has no warning; the start-up summary names the ceiling', () => {
    const c = loadConfig({ env: { DISABLE_NETWORK: 'false', SANDPIT_SANDBOX_EGRESS_ALLOW: 'pypi.org' } });
    assert.deepEqual(configWarnings(c), []);
    assert.match(egressSummary(c), /DISABLE_NETWORK is false.*1 ceiling entries \(sandbox\.egress\.allow\)/);
    assert.match(egressSummary(loadConfig({ env: {} })), /Egress is off: DISABLE_NETWORK is true/);
  });

  test('sandbox.disableNetwork: false in a file is warned about too', () => {
    assert.equal(
      configWarnings(loadConfig({ configPath: file('sandbox:\n  disableNetwork: false\n') })).length,
      1,
    );
  });

  test('the default configuration has no warnings', () => {
    assert.deepEqual(configWarnings(loadConfig({ env: {} })), []);
    assert.deepEqual(configWarnings(loadConfig({ env: { DISABLE_NETWORK: 'true' } })), []);
  });
});

describe('renamed settings: the old names still work, with a warning', () => {
  test('an old key in the file moves to its new place and is reported', () => {
    const warnings: string[] = [];
    const path = file('kubernetes:\n  workers: 7\n  gatewayNamespace: runs\n');
    const c = loadConfig({ configPath: path, warnings });
    assert.equal(c.kubernetes.operator.workers, 7);
    assert.equal(c.kubernetes.gateway.namespace, 'runs');
    assert.deepEqual(warnings.sort(), [
      `kubernetes.gatewayNamespace (in ${path}) is deprecated: use kubernetes.gateway.namespace`,
      `kubernetes.workers (in ${path}) is deprecated: use kubernetes.operator.workers`,
    ]);
  });

  test('the new key wins over the old one in the same file', () => {
    const c = loadConfig({ configPath: file('kubernetes:\n  workers: 7\n  operator:\n    workers: 9\n') });
    assert.equal(c.kubernetes.operator.workers, 9);
  });

  test('an old variable sets the new field and is reported; the new variable wins', () => {
    const warnings: string[] = [];
    const c = loadConfig({ env: { SANDPIT_KUBERNETES_GATEWAY_ADMIT_TIMEOUT_SECONDS: '12' }, warnings });
    assert.equal(c.kubernetes.gateway.pickupTimeoutSeconds, 12);
    assert.deepEqual(warnings, [
      'SANDPIT_KUBERNETES_GATEWAY_ADMIT_TIMEOUT_SECONDS is deprecated: use SANDPIT_KUBERNETES_GATEWAY_PICKUP_TIMEOUT_SECONDS',
    ]);
    const both = loadConfig({
      env: { SANDPIT_KUBERNETES_WORKERS: '3', SANDPIT_KUBERNETES_OPERATOR_WORKERS: '5' },
    });
    assert.equal(both.kubernetes.operator.workers, 5);
  });

  test('a move that keeps its variable name is no deprecation', () => {
    const warnings: string[] = [];
    const c = loadConfig({ env: { SANDPIT_KUBERNETES_GATEWAY_NAMESPACE: 'runs' }, warnings });
    assert.equal(c.kubernetes.gateway.namespace, 'runs');
    assert.deepEqual(warnings, []);
  });

  test('an invalid value under an old name is named by where it came from', () => {
    assert.throws(
      () => loadConfig({ env: { SANDPIT_KUBERNETES_WORKERS: 'many' } }),
      /kubernetes\.operator\.workers \(from env SANDPIT_KUBERNETES_WORKERS = "many"\)/,
    );
  });
});

describe('command-line flags', () => {
  test('a flag beats the environment and the file, and its errors name the flag', () => {
    const env = { SANDPIT_LOGGING_LEVEL: 'warn' };
    const flags = [{ field: 'logging.level', flag: '--log-level', value: 'debug' }];
    assert.equal(loadConfig({ env, flags }).logging.level, 'debug');
    assert.throws(
      () => loadConfig({ env, flags: [{ ...flags[0]!, value: 'loud' }] }),
      (e: unknown) =>
        e instanceof AppError &&
        e.exitCode === 78 &&
        /logging\.level \(from flag --log-level = "loud"\): expected one of fatal, error/.test(e.message),
    );
  });
});

describe('an unknown key suggests the nearest valid one', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandpit-config-typo-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const cases: [string, RegExp][] = [
    [
      'sandbox:\n  maxMemroy: 1g\n',
      /sandbox: unknown setting\(s\) maxMemroy \(did you mean maxMemory\?\) in file /,
    ],
    ['sandbx:\n  maxMemory: 1g\n', /\(top level\): unknown setting\(s\) sandbx \(did you mean sandbox\?\)/],
    ['server:\n  allowedhosts: [a]\n', /allowedhosts \(did you mean allowedHosts\?\)/],
    [
      'auth:\n  tokens:\n    - name: ci\n      token: abcdefghijk\n      template: [python]\n',
      /auth\.tokens\.0: unknown setting\(s\) template \(did you mean templates\?\)/,
    ],
    ['sandbox:\n  flux: 1\n', /sandbox: unknown setting\(s\) flux in file /],
  ];
  for (const [yaml, want] of cases) {
    test(JSON.stringify(yaml), () => {
      const file = join(dir, 'c.yaml');
      writeFileSync(file, yaml);
      assert.throws(
        () => loadConfig({ configPath: file }),
        (e: unknown) => e instanceof AppError && want.test(e.message),
      );
    });
  }
});
