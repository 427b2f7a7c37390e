/**
 * A warm pool container's runner starts python before the job comes (`--preload`,
 * images/runner/preload/python3). A program run by that preloaded interpreter must not be able to
 * tell, from anything but /proc/self/cmdline and a stack it walks itself, that it was not started
 * for its job: each case runs cold and warm, under runc and under gVisor, and the two results must
 * be the same. A job the preloader cannot serve as its own command would (its own variables) gets
 * a fresh interpreter.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import type { RunRequestInput, RunResult } from '../../../src/api/run.js';
import { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { DEFAULT_POOL_OPTIONS } from '../../../src/backends/docker/pool/pool-options.js';
import { requireDocker, runToEnd, spec } from '../../support/docker.js';

/** What python says of how it was started and what it holds, before the program imports anything. */
const IDENTITY = `import sys
modules = sorted(sys.modules)
import os, resource
print(sys.argv, sys.orig_argv, sys.path, os.getcwd())
print(__name__, __file__, __doc__, __spec__, __cached__, __package__, __builtins__)
print(type(__loader__).__name__, __loader__.name, __loader__.path)
print(list(globals()))
print(modules)
print(sorted(os.environ.items()))
print(sorted(os.listdir("/proc/self/fd")))
print([os.readlink(f"/proc/self/fd/{fd}") for fd in (0, 3)], os.fstat(0).st_mode, os.fstat(3).st_mode)
print([resource.getrlimit(r) for r in (resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE, resource.RLIMIT_CORE)])
print(sys.flags, sys.stdin.encoding, sys.stdout.encoding, sys.stdout.line_buffering)
import __main__
print(__main__ is sys.modules["__main__"], __main__.__file__)
`;

const CASES: Record<string, RunRequestInput> = {
  'how python was started, and what it holds': { template: 'python', code: IDENTITY },
  'stdin given': {
    template: 'python',
    code: 'import os, sys\nprint(repr(sys.stdin.read()), os.fstat(0).st_mode, os.readlink("/proc/self/fd/0"))',
    stdin: 'from stdin\n',
  },
  'an uncaught exception: its traceback and exit code': {
    template: 'python',
    code: 'def f():\n    raise ValueError("boom")\n\n\nf()\n',
  },
  'a syntax error': { template: 'python', code: 'print("before")\ndef (:\n' },
  'sys.exit with a code': { template: 'python', code: 'import sys\nprint("out")\nsys.exit(3)' },
  'sys.exit with a message': { template: 'python', code: 'import sys\nsys.exit("bye")' },
  'KeyboardInterrupt: atexit and threads run, then death by SIGINT': {
    template: 'python',
    code: 'import atexit, threading, time\natexit.register(lambda: print("atexit"))\nthreading.Thread(target=lambda: (time.sleep(0.2), print("thread"))).start()\nraise KeyboardInterrupt',
  },
  'a warning at the top level, and a coding cookie': {
    template: 'python',
    code: '# -*- coding: latin-1 -*-\nimport warnings\nwarnings.warn("w")\nprint("caf\u00e9")',
  },
  'a deadline': {
    template: 'python',
    code: 'print("start", flush=True)\nwhile True:\n    pass',
    timeoutSeconds: 1,
  },
};

/** What a program can tell of how it ran: everything in the result but ids and times. */
const seen = (r: RunResult) => ({
  phase: r.phase,
  reason: r.reason,
  message: r.message,
  exitCode: r.exitCode,
  timedOut: r.timedOut,
  stdout: r.stdout,
  stderr: r.stderr,
  stdoutBytes: r.stdoutBytes,
  stderrBytes: r.stderrBytes,
  truncated: r.truncated,
});

const CMDLINE = 'print(open("/proc/self/cmdline", "rb").read().split(b"\\0")[1].decode())';

for (const runtime of ['runc', 'runsc'] as const) {
  describe(`a preloaded python against a fresh one (${runtime})`, () => {
    let docker: Docker;
    let cold: DockerBackend;
    let warm: DockerBackend;
    const opts = { defaultRuntime: runtime, allowedRuntimes: [runtime] };
    const run = (backend: DockerBackend, request: RunRequestInput) => runToEnd(backend, request, opts);
    /** A run served by a pool container, once the pool is full again (so that it is never cold). */
    const warmRun = async (request: RunRequestInput): Promise<RunResult> => {
      assert.ok(await warm.pool?.filled(60_000), 'the pool refilled');
      const r = await run(warm, request);
      assert.equal(r.served, 'warm');
      return r;
    };

    before(async () => {
      docker = await requireDocker();
      cold = new DockerBackend({ docker });
      warm = new DockerBackend({ docker, pool: { ...DEFAULT_POOL_OPTIONS, minIdle: 1, maxSize: 2 } });
      warm.pool?.start([spec({ template: 'python', code: '' }, opts)]);
    });
    after(async () => {
      await Promise.all([cold.close(), warm.close()]);
    });

    test('a warm run is served by the preloaded interpreter; a cold one starts its own', async () => {
      assert.equal(
        (await warmRun({ template: 'python', code: CMDLINE })).stdout,
        '/usr/local/lib/sandpit/preload/python3\n',
      );
      const c = await run(cold, { template: 'python', code: CMDLINE });
      assert.equal(c.served, 'cold');
      assert.equal(c.stdout, '/sandpit/code/main.py\n');
    });

    test('a job with variables of its own gets a fresh interpreter from the warm container', async () => {
      const r = await warmRun({
        template: 'python',
        code: `import os\n${CMDLINE}\nprint(os.environ["MINE"])`,
        env: [{ name: 'MINE', value: 'x' }],
      });
      assert.equal(r.stdout, '/sandpit/code/main.py\nx\n');
    });

    for (const [name, request] of Object.entries(CASES)) {
      test(`the same result: ${name}`, async () => {
        const w = await warmRun(request);
        const c = await run(cold, request);
        assert.deepEqual(seen(w), seen(c));
      });
    }
  });
}
