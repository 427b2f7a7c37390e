/**
 * `sandpit-runner --pool`, the runner of a Kubernetes pool pod, in a real container (the same
 * runner and image a pod runs): it waits on its attached stdin for one keyed job, passes the
 * program's output on plain (the container's log) and ends it with the exit trailer; no complete
 * job within 10 s of its first byte, or stdin ending first, is a failure with exit 125 and no
 * trailer; the end of stdin after the job does not stop the program.
 */
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import { before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import { buildContainerConfig } from '../../../src/backends/docker/container-config.js';
import { DockerDemuxer } from '../../../src/backends/docker/demux.js';
import { currentOwner } from '../../../src/backends/docker/owner.js';
import { parseTrailer, TrailerFilter } from '../../../src/runner/exit-trailer.js';
import { encodeJob, newChannelKey } from '../../../src/runner/protocol.js';
import { requireDocker, runId, spec } from '../../support/docker.js';

interface PoolContainer {
  container: Docker.Container;
  stdin: Duplex;
}

/** A started pool container (stdin open for one attach, as a pool pod's `stdinOnce: true`). */
async function startPoolContainer(docker: Docker): Promise<PoolContainer> {
  const config = buildContainerConfig(spec({ template: 'python', code: 'pass' }), {
    name: `sandpit-pool-runner-${runId()}`,
    kind: 'run',
    owner: currentOwner(),
  });
  const container = await docker.createContainer({
    ...config,
    Cmd: ['--pool'],
    AttachStdin: true,
    OpenStdin: true,
    StdinOnce: true,
    HostConfig: { ...config.HostConfig, LogConfig: { Type: 'json-file', Config: {} } },
  });
  const stdin = (await container.attach({
    stream: true,
    stdin: true,
    stdout: false,
    stderr: false,
    hijack: true,
  })) as unknown as Duplex;
  await container.start();
  return { container, stdin };
}

/** Waits for the container's exit; returns its code and its log, each stream on its own. */
async function finish(
  p: PoolContainer,
): Promise<{ exitCode: number; stdout: Buffer; stderr: string; ms: number }> {
  const t0 = Date.now();
  try {
    const { StatusCode } = (await p.container.wait()) as { StatusCode: number };
    const ms = Date.now() - t0;
    const log = await p.container.logs({ stdout: true, stderr: true, follow: false });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    new DockerDemuxer(
      (b) => out.push(b),
      (b) => err.push(b),
    ).push(log);
    return { exitCode: StatusCode, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString(), ms };
  } finally {
    p.stdin.destroy();
    await p.container.remove({ force: true, v: true });
  }
}

/** The plain output and the trailer's end, as the operator reads them (with the job's key). */
function split(stdout: Buffer, key: Buffer): { output: string; end: ReturnType<typeof parseTrailer> } {
  const filter = new TrailerFilter(key);
  const head = filter.push(stdout);
  const { rest, end } = filter.end();
  return { output: Buffer.concat([head, rest]).toString(), end };
}

describe('sandpit-runner --pool (a pool pod’s runner)', () => {
  let docker: Docker;
  before(async () => {
    docker = await requireDocker();
  });

  test('one job: the plain output, then the exit trailer signed with the job’s key', async () => {
    const p = await startPoolContainer(docker);
    const key = newChannelKey();
    const effective = spec({
      template: 'python',
      code: 'import sys\nprint("hello from the pool")\nprint("to stderr", file=sys.stderr)\nsys.exit(3)',
    });
    p.stdin.write(encodeJob(effective, { key }));
    const r = await finish(p);
    assert.equal(r.exitCode, 3, r.stderr);
    const { output, end } = split(r.stdout, key);
    assert.equal(output, 'hello from the pool\n');
    assert.equal(r.stderr, 'to stderr\n');
    assert.equal(end?.kind, 'exit');
    assert.ok(end?.kind === 'exit');
    assert.equal(end.report.exitCode, 3);
    assert.equal(end.report.stdoutBytes, 'hello from the pool\n'.length);
    assert.equal(end.report.stderrBytes, 'to stderr\n'.length);
    // The trailer is one line, the last bytes of stdout, and no other key opens it.
    // eslint-disable-next-line no-control-regex -- RS starts the trailer line
    assert.match(r.stdout.toString(), /\n\x1esandpit-exit [0-9a-f]{32} \{[^\n]*\}\n$/);
    assert.equal(parseTrailer(r.stdout.subarray(r.stdout.lastIndexOf('\n\x1e')), newChannelKey()), undefined);
  });

  test('the end of stdin right after the job does not stop the program', async () => {
    const p = await startPoolContainer(docker);
    const key = newChannelKey();
    const effective = spec({ template: 'python', code: 'import time\ntime.sleep(1)\nprint("still here")' });
    p.stdin.write(encodeJob(effective, { key }));
    p.stdin.end();
    const r = await finish(p);
    assert.equal(r.exitCode, 0, r.stderr);
    const { output, end } = split(r.stdout, key);
    assert.equal(output, 'still here\n');
    assert.equal(end?.kind === 'exit' && end.report.exitCode, 0);
  });

  test('a job it refuses once read gets the failure trailer', async () => {
    const p = await startPoolContainer(docker);
    const key = newChannelKey();
    // A keyed job with one record of an unknown type.
    const body = Buffer.from([0x7a, 0, 0, 0, 0]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(body.length);
    p.stdin.write(Buffer.concat([Buffer.from('SPJ3'), key, len, body]));
    const r = await finish(p);
    assert.equal(r.exitCode, 125);
    const { output, end } = split(r.stdout, key);
    assert.equal(output, '');
    assert.deepEqual(end, { kind: 'failure', message: 'unknown job record type 0x7a' });
    assert.match(r.stderr, /unknown job record type 0x7a/);
  });

  test('stdin closed before any job: exit 125, no trailer', async () => {
    const p = await startPoolContainer(docker);
    p.stdin.end();
    const r = await finish(p);
    assert.equal(r.exitCode, 125);
    assert.equal(r.stdout.length, 0);
    assert.match(r.stderr, /no job arrived: stdin ended first/);
  });

  test('a job started but not complete within 10 s: exit 125, no trailer', async () => {
    const p = await startPoolContainer(docker);
    const job = encodeJob(spec({ template: 'python', code: 'print(1)' }), { key: newChannelKey() });
    p.stdin.write(job.subarray(0, 10)); // the magic and part of the key: the clock starts
    const r = await finish(p);
    assert.equal(r.exitCode, 125);
    assert.equal(r.stdout.length, 0);
    assert.match(r.stderr, /no job arrived within 10 s/);
    assert.ok(r.ms >= 9000 && r.ms < 30_000, `exited after ${r.ms} ms`);
  });
});
