/**
 * Idempotent runs on both backends: the same requestId sent twice at once, and again once the run
 * has ended, makes exactly one run (one container; one SandboxRun and its pod), and every send gets
 * its result; another request under the key is a CONFLICT. The allowed difference (target.ts,
 * `keys`): on Kubernetes a key names its SandboxRun, which another gateway replica finds as well;
 * on Docker only the gateway process that ran it knows the key.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { RunRequestInput } from '../../src/api/run.js';
import { isAppError } from '../../src/shared/errors.js';
import { liveText, observeRun, PRINCIPAL, type ContractTarget, type Observed } from './target.js';

const CODE = "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second', flush=True)";

function uniqueKey(): string {
  return `contract:${Date.now().toString(36)}.${Math.random().toString(36).slice(2, 8)}`;
}

/** Polls the sandboxes of `runId` while `until` is pending: the most seen at once. */
async function mostSandboxes(x: ContractTarget, runId: () => string | undefined, until: Promise<unknown>) {
  let done = false;
  void until.finally(() => (done = true));
  let most = 0;
  while (!done) {
    const id = runId();
    if (id) most = Math.max(most, (await x.sandboxesOf(id)).length);
    await new Promise((r) => setTimeout(r, 100));
  }
  return most;
}

/** `b` is `a`'s run; when it joined while the run was live, it streamed all of its output. */
function assertSameRun(a: Observed, b: Observed, live: boolean): void {
  assert.equal(b.result.runId, a.result.runId);
  assert.equal(a.result.phase, 'Succeeded', JSON.stringify(a.result));
  assert.equal(a.result.stdout, 'first\nsecond\n');
  assert.equal(b.result.stdout, a.result.stdout);
  assert.equal(b.result.exitCode, 0);
  if (live) assert.equal(liveText(b), 'first\nsecond\n', 'the repeat streams the run');
}

export function idempotencyCases(target: () => ContractTarget, onFailure: () => void = () => {}): void {
  const it = (name: string, body: (t: TestContext, x: ContractTarget) => Promise<void>): void => {
    test(name, { timeout: 180_000 }, async (t) => {
      try {
        await body(t, target());
      } catch (e) {
        onFailure();
        throw e;
      }
    });
  };

  it('idempotent runs: one requestId twice at once, then again after the end: one run, one sandbox', async (_t, x) => {
    const request: RunRequestInput = { template: 'python', code: CODE, requestId: uniqueKey() };
    const starts = x.backend.starts;
    const records = await x.runRecordCount?.();
    let runId: string | undefined;
    const both = Promise.all([
      observeRun(x, request, (id) => (runId = id)),
      observeRun(x, request, (id) => (runId ??= id)),
    ]);
    const most = await mostSandboxes(x, () => runId, both);
    const [a, b] = await both;
    assertSameRun(a, b, true);
    assert.equal(x.backend.starts - starts, 1, 'the backend was asked for one run');
    assert.equal(most, 1, 'one sandbox at most at any time');
    const again = await observeRun(x, request);
    assertSameRun(a, again, false);
    assert.equal(x.backend.starts - starts, 1, 'the repeat after the end started nothing');
    if (records !== undefined) assert.equal((await x.runRecordCount!()) - records, 1, 'one SandboxRun');
  });

  it('idempotent runs: another request under a used requestId is a CONFLICT, and runs nothing', async (_t, x) => {
    const requestId = uniqueKey();
    const first = await observeRun(x, { template: 'python', code: 'print(1)', requestId });
    const starts = x.backend.starts;
    await assert.rejects(
      x.service.runs.run({ template: 'python', code: 'print(2)', requestId }, PRINCIPAL),
      (e: unknown) => {
        assert.ok(isAppError(e) && e.code === 'CONFLICT', String(e));
        assert.match(e.message, new RegExp(`requestId "${requestId}" was already used`));
        return true;
      },
    );
    assert.equal(x.backend.starts, starts);
    assert.equal((await x.service.runs.get(first.result.runId, PRINCIPAL)).stdout, '1\n');
  });

  it('idempotent runs: another gateway replica finds the run of a key where the backend records runs', async (_t, x) => {
    const replica = x.replica?.();
    if (!replica) {
      assert.equal(x.keys, 'process', 'only a backend whose keys live in one process has no replicas');
      return;
    }
    assert.equal(x.keys, 'record');
    const request: RunRequestInput = { template: 'python', code: CODE, requestId: uniqueKey() };
    const records = await x.runRecordCount!();
    const other = { ...x, service: replica };
    const [a, b] = await Promise.all([observeRun(x, request), observeRun(other, request)]);
    assertSameRun(a, b, true);
    assert.equal((await x.runRecordCount!()) - records, 1, 'one SandboxRun for both replicas');
    const after = await observeRun({ ...x, service: x.replica!() }, request);
    assertSameRun(a, after, false);
    assert.equal((await x.runRecordCount!()) - records, 1);
  });
}
