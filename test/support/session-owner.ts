/**
 * A gateway stand-in for the adoption tests, run as its own process so that a test can SIGKILL
 * it: it creates one session on the Docker backend under the instance id it is given, writes a
 * file, runs one exec to its end (its report taken: the runner's history keeps it), starts a
 * background exec that outlives it, prints {sessionId, principal} as one JSON line and waits to
 * be killed. With OWNER_BACKEND=oci, on the oci backend instead (the instance id is then unused:
 * its sessions end with their gateway).   usage: session-owner.ts INSTANCE_ID SESSION_ID
 */
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { makeOciBackend } from './oci.js';
import { execSpec, sessionPolicy, sessionSpec } from './sessions.js';

async function main(): Promise<void> {
  const [instanceId, sessionId] = process.argv.slice(2);
  if (!instanceId || !sessionId) throw new Error('usage: session-owner.ts INSTANCE_ID SESSION_ID');
  const backend =
    process.env.OWNER_BACKEND === 'oci' ? await makeOciBackend() : new DockerBackend({ instanceId });
  const policy = sessionPolicy();
  const spec = sessionSpec({ template: 'bash' }, policy);
  const sandbox = await backend.sessions.createSession(spec, { sessionId, principal: 'owner' });
  await sandbox.writeFile({ path: 'kept.txt', data: Buffer.from('still here\n') });
  await sandbox.exec(execSpec({ shell: 'echo before; exit 2' }, spec, policy), {
    execId: 'before',
    onOutput: () => {},
  }).result;
  sandbox.exec(
    execSpec({ shell: 'echo early; sleep 3; echo late; exit 7', background: true }, spec, policy),
    {
      execId: 'inflight',
      onOutput: () => {},
    },
  );
  process.stdout.write(`${JSON.stringify({ sessionId, principal: 'owner' })}\n`);
  setInterval(() => {}, 1 << 30);
}

main().catch((e: unknown) => {
  process.stderr.write(`${String(e)}\n`);
  process.exit(1);
});
