import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LABEL_POOL_POD } from '../../../../src/api/v1alpha1/labels.js';
import type { AttachedPod } from '../../../../src/kube/attach.js';
import type { Pod } from '../../../../src/kube/objects.js';
import { claimPoolPod } from '../../../../src/controller/pod/claim-pool-pod.js';
import { POOL_RUNNER_COMMAND } from '../../../../src/controller/sandboxpool/build-pool-pod.js';
import { isRunPoolPod, PoolAttachments } from '../../../../src/controller/sandboxrun/pool-attachments.js';
import { createLogger } from '../../../../src/observability/logger.js';
import type { Store } from '../../../../src/kube/store.js';
import { KubeApiError } from '../../../../src/kube/errors.js';
import { runPodLabels } from '../../../../src/controller/sandboxrun/run-ref.js';
import { poolPod, RUN } from '../fixtures.js';

const SHAPE = 'shape-a';
const runPod = (name: string, over: Parameters<typeof poolPod>[2] = {}): Pod =>
  poolPod(name, SHAPE, { command: [...POOL_RUNNER_COMMAND], ...over });

/** An attach that stays open until closed, and records what the test routes through it. */
class FakeAttach implements AttachedPod {
  open = true;
  closedBy: string | undefined;
  private end!: (why: string) => void;
  readonly closed = new Promise<string>((r) => (this.end = r));
  readonly stdout: (d: Buffer) => void;
  constructor(stdout: (d: Buffer) => void) {
    this.stdout = stdout;
  }
  write(): Promise<void> {
    return Promise.resolve();
  }
  close(): void {
    this.open = false;
    this.closedBy ??= 'test';
    this.end('detached');
  }
  /** The other side ends the stream (the apiserver, the kubelet). */
  drop(): void {
    this.open = false;
    this.end('closed (1006)');
  }
}

/** `opens`: when each attach finishes opening (at once by default). */
function harness(opens: (pod: string) => Promise<void> = () => Promise.resolve()) {
  const attaches = new Map<string, FakeAttach>();
  const kube = {
    attach: async (t: { pod: string }, onStdout: (d: Buffer) => void): Promise<AttachedPod> => {
      const a = new FakeAttach(onStdout);
      attaches.set(t.pod, a);
      await opens(t.pod);
      return a;
    },
  };
  const held = new PoolAttachments({ kube, logger: createLogger({ level: 'silent' }) });
  return { held, attaches };
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('PoolAttachments: attaches held ahead to idle run pool pods', () => {
  test('isRunPoolPod: only a pod running the runner’s pool mode', () => {
    assert.equal(isRunPoolPod(runPod('a')), true);
    assert.equal(
      isRunPoolPod(poolPod('b', SHAPE, { command: ['/usr/local/bin/sandpit-runner', '--session'] })),
      false,
    );
    assert.equal(isRunPoolPod(poolPod('c', SHAPE)), false);
  });

  test('nothing is attached before the manager acts (leads); then every idle run pool pod is', async () => {
    const { held, attaches } = harness();
    held.observe('add', runPod('a'));
    assert.equal(attaches.size, 0);
    held.setActive(true, [runPod('a'), runPod('b', { ready: false }), runPod('c', { owner: 'none' })]);
    await settle();
    assert.deepEqual(
      [...attaches.keys()],
      ['a'],
      'not a pod that is not ready, nor one no SandboxPool controls',
    );
    assert.equal(held.holds('uid-a'), true);
  });

  test('a pod that is no longer idle, or gone, is let go; losing the Lease closes every idle attach', async () => {
    const { held, attaches } = harness();
    held.setActive(true, [runPod('a'), runPod('b')]);
    await settle();
    held.observe('update', runPod('a', { labels: { [LABEL_POOL_POD]: 'claimed' } }));
    assert.equal(attaches.get('a')?.open, false);
    held.setActive(false);
    assert.equal(attaches.get('b')?.open, false);
    assert.equal(held.size, 0);
  });

  test('an attach that ended is never made again to the same pod (its stdin is closed)', async () => {
    const { held, attaches } = harness();
    held.setActive(true, [runPod('a')]);
    await settle();
    const first = attaches.get('a')!;
    first.drop();
    await settle();
    assert.equal(held.holds('uid-a'), false);
    held.observe('update', runPod('a'));
    await settle();
    assert.equal(attaches.get('a'), first, 'no second attach');
  });

  test('one claim at a time per pod; the winner takes the attach and routes its output', async () => {
    const { held, attaches } = harness();
    held.setActive(true, [runPod('a')]);
    await settle();
    assert.equal(held.reserve('uid-a'), true);
    assert.equal(held.reserve('uid-a'), false, 'a second claim of this operator skips the pod');
    assert.equal(held.holds('uid-a'), false);
    // While claimed, an update showing the pod claimed does not close the attach under the claim.
    held.observe('update', runPod('a', { labels: { [LABEL_POOL_POD]: 'claimed' } }));
    const taken = held.take('uid-a');
    assert.ok(taken);
    assert.equal(await taken.opened, attaches.get('a'));
    const seen: string[] = [];
    taken.route(
      (d) => seen.push(d.toString()),
      () => undefined,
    );
    attaches.get('a')!.stdout(Buffer.from('out'));
    assert.deepEqual(seen, ['out']);
    assert.equal(held.size, 0, 'the serve holds it now');
  });

  test('a claim that takes an attach still opening gets that attach, never closed under it', async () => {
    let opened!: () => void;
    const { held, attaches } = harness(() => new Promise((r) => (opened = r)));
    held.setActive(true, [runPod('a')]);
    await settle();
    assert.equal(held.holds('uid-a'), false, 'not open yet');
    assert.equal(held.reserve('uid-a'), true);
    const taken = held.take('uid-a');
    assert.ok(taken, 'the serve waits for this attach instead of opening a second one');
    opened();
    const attach = await taken.opened;
    assert.equal(attach, attaches.get('a'));
    assert.equal(attach?.open, true);
    assert.equal(held.size, 0);
  });

  test('an attach that ended before the claim took it is not handed over', async () => {
    const { held, attaches } = harness();
    held.setActive(true, [runPod('a')]);
    await settle();
    held.reserve('uid-a');
    attaches.get('a')!.open = false; // ended, its closed handler not run yet
    assert.equal(held.take('uid-a'), undefined);
  });

  test('a claim that lost gives the pod back', async () => {
    const { held } = harness();
    held.setActive(true, [runPod('a')]);
    await settle();
    held.reserve('uid-a');
    held.release('uid-a');
    assert.equal(held.holds('uid-a'), true);
  });
});

describe('claimPoolPod with a hold: held pods first, never one another claim has', () => {
  const store = (pods: Pod[]): Store<Pod> => ({
    get: (ns, name) => pods.find((p) => p.metadata?.namespace === ns && p.metadata.name === name),
    list: () => pods,
    hasSynced: () => true,
  });
  const request = {
    owner: RUN,
    ownerLabels: runPodLabels(RUN),
    shapeLabel: SHAPE,
    remainingSeconds: 35,
    now: new Date('2026-01-01T00:01:00Z'),
  };

  test('the pod attached to ahead is tried before an older one that is not', async () => {
    const pods = [
      runPod('old', { created: '2026-01-01T00:00:00Z' }),
      runPod('new', { created: '2026-01-01T00:00:30Z' }),
    ];
    const tried: string[] = [];
    const kube = {
      replacePod: (_ns: string, pod: Pod) => {
        tried.push(pod.metadata!.name!);
        return Promise.resolve(pod);
      },
      getPod: () => Promise.resolve(undefined),
    };
    const hold = { holds: (uid: string) => uid === 'uid-new', reserve: () => true, release: () => undefined };
    const out = await claimPoolPod({ kube, pods: store(pods) }, { ...request, hold });
    assert.equal(out.result, 'claimed');
    assert.deepEqual(tried, ['new']);
  });

  test('a pod another claim of this operator has is skipped; a conflict frees the pod and tries the next', async () => {
    const pods = [
      runPod('a', { created: '2026-01-01T00:00:00Z' }),
      runPod('b', { created: '2026-01-01T00:00:10Z' }),
      runPod('c', { created: '2026-01-01T00:00:20Z' }),
    ];
    const released: string[] = [];
    const kube = {
      replacePod: (_ns: string, pod: Pod) =>
        pod.metadata!.name === 'b'
          ? Promise.reject(
              new KubeApiError('conflict', { code: 'BACKEND_ERROR', status: 409, reason: 'Conflict' }),
            )
          : Promise.resolve(pod),
      getPod: () => Promise.resolve(undefined), // gone by now
    };
    const hold = {
      holds: () => false,
      reserve: (uid: string) => uid !== 'uid-a',
      release: (uid: string) => void released.push(uid),
    };
    const out = await claimPoolPod({ kube, pods: store(pods) }, { ...request, hold });
    assert.equal(out.result, 'claimed');
    assert.equal(out.result === 'claimed' && out.pod.metadata?.name, 'c');
    assert.deepEqual(released, ['uid-b']);
  });
  test('a conflict reads the pod again: still idle, one more try on what it read; taken, or a second conflict, the next pod', async () => {
    const conflict = () =>
      Promise.reject(
        new KubeApiError('conflict', { code: 'BACKEND_ERROR', status: 409, reason: 'Conflict' }),
      );
    const at = (pod: Pod, rv: string): Pod => ({
      ...pod,
      metadata: { ...pod.metadata, resourceVersion: rv },
    });
    const pods = [
      at(runPod('a', { created: '2026-01-01T00:00:00Z' }), '1'),
      at(runPod('b', { created: '2026-01-01T00:00:10Z' }), '1'),
    ];
    const claimWith = async (fresh: (pod: Pod) => Pod | undefined, conflictsAt: (p: Pod) => boolean) => {
      const tried: string[] = [];
      const counted: string[] = [];
      const kube = {
        replacePod: (_ns: string, pod: Pod) => {
          tried.push(`${pod.metadata!.name}@${pod.metadata!.resourceVersion}`);
          return conflictsAt(pod) ? conflict() : Promise.resolve(pod);
        },
        getPod: (_ns: string, name: string) =>
          Promise.resolve(fresh(pods.find((p) => p.metadata!.name === name)!)),
      };
      const out = await claimPoolPod(
        { kube, pods: store(pods) },
        { ...request, countClaim: (r) => void counted.push(r) },
      );
      return { out, tried, counted };
    };
    const stale = (p: Pod) => p.metadata!.resourceVersion === '1';
    const still = await claimWith((p) => at(p, '2'), stale);
    assert.equal(still.out.result === 'claimed' && still.out.pod.metadata?.name, 'a');
    assert.deepEqual(still.tried, ['a@1', 'a@2'], 'the cache was behind a write that left it idle');
    assert.deepEqual(still.counted, ['conflict', 'warm']);
    const taken = await claimWith(
      (p) => ({
        ...at(p, '2'),
        metadata: { ...at(p, '2').metadata, labels: { ...p.metadata!.labels, [LABEL_POOL_POD]: 'claimed' } },
      }),
      (p) => p.metadata!.name === 'a',
    );
    assert.equal(taken.out.result === 'claimed' && taken.out.pod.metadata?.name, 'b');
    assert.deepEqual(taken.tried, ['a@1', 'b@1'], 'another claim has it: no second try');
    const twice = await claimWith(
      (p) => at(p, '2'),
      (p) => p.metadata!.name === 'a',
    );
    assert.deepEqual(twice.tried, ['a@1', 'a@2', 'b@1'], 'one read again per pod, never a loop');
  });
});
