// What to look at when a cluster test fails: the namespace's events, its pods (status and logs),
// the node's conditions and the tails of the component logs. Every section is best-effort.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import {
  ApiException,
  CoreV1Api,
  type CoreV1Event,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import { withTimeout } from '../../../src/shared/time.js';

export interface DiagnosticsSource {
  kc: KubeConfig;
  nodeName: string;
  logDir: string;
}

const COMPONENT_TAILS: ReadonlyArray<[string, number]> = [
  ['kubelet', 60],
  ['kube-apiserver', 25],
  ['kube-controller-manager', 25],
  ['kube-scheduler', 10],
  ['etcd', 5],
];

export async function collectDiagnostics(src: DiagnosticsSource, namespace: string): Promise<string> {
  const core = src.kc.makeApiClient(CoreV1Api);
  const sections: string[] = [];
  const section = async (title: string, fn: () => Promise<string>): Promise<void> => {
    let body: string;
    try {
      body = await withTimeout(fn(), 10_000, `${title}: no answer in 10 s`);
    } catch (e) {
      body = `(unavailable: ${apiErrorMessage(e)})`;
    }
    sections.push(`===== ${title}\n${body.trimEnd()}`);
  };

  await section(`events in ${namespace}`, async () => {
    const list = await core.listNamespacedEvent({ namespace });
    const time = (e: CoreV1Event): string =>
      isoTime(e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp);
    return (
      [...list.items]
        .sort((a, b) => time(a).localeCompare(time(b)))
        .map(
          (e) =>
            `${time(e)} ${e.type ?? ''} ${e.reason ?? ''} ${e.involvedObject.kind ?? ''}/${e.involvedObject.name ?? ''} x${e.count ?? 1}: ${e.message ?? ''}`,
        )
        .join('\n') || '(none)'
    );
  });

  let pods: V1Pod[] = [];
  await section(`pods in ${namespace}`, async () => {
    pods = (await core.listNamespacedPod({ namespace })).items;
    return pods.map(describePod).join('\n') || '(none)';
  });
  for (const pod of pods) {
    for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
      const name = pod.metadata?.name ?? '?';
      await section(`log ${name}/${c.name} (last 50 lines)`, async () => {
        const text = await core.readNamespacedPodLog({ namespace, name, container: c.name, tailLines: 50 });
        return String(text) || '(empty)';
      });
    }
  }

  await section(`node ${src.nodeName}`, async () => {
    const node = await core.readNode({ name: src.nodeName });
    return (node.status?.conditions ?? [])
      .map((c) => `${c.type}=${c.status} ${c.reason ?? ''} ${c.message ?? ''}`)
      .join('\n');
  });

  for (const [component, lines] of COMPONENT_TAILS) {
    const file = path.join(src.logDir, `${component}.log`);
    await section(
      `${file}: lines naming ${namespace} (last ${lines}), then the last ${lines} others`,
      async () => {
        const all = (await readFile(file, 'utf8'))
          .trimEnd()
          .split('\n')
          .filter((l) => !NOISE.some((n) => n.test(l)));
        const mentions = all.filter((l) => l.includes(namespace)).slice(-lines);
        return [...mentions, '-----', ...all.slice(-lines)].join('\n');
      },
    );
  }
  return sections.join('\n\n');
}

export function describePod(pod: V1Pod): string {
  const s = pod.status;
  const lines = [
    `pod ${pod.metadata?.name ?? '?'}: phase=${s?.phase ?? '?'}${s?.reason ? ` reason=${s.reason}` : ''}${s?.message ? ` message=${s.message}` : ''}`,
  ];
  for (const c of s?.conditions ?? [])
    lines.push(`  condition ${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ''}`);
  for (const c of [...(s?.initContainerStatuses ?? []), ...(s?.containerStatuses ?? [])]) {
    lines.push(
      `  container ${c.name}: ready=${c.ready} restarts=${c.restartCount} state=${JSON.stringify(c.state)}`,
    );
  }
  return lines.join('\n');
}

/** Log lines that say nothing about a failing test (cAdvisor on this machine's cgroup v1 layout). */
const NOISE: readonly RegExp[] = [/Error getting perf_event cgroup path/];

function isoTime(t: Date | string | undefined): string {
  if (t === undefined) return '?';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toISOString();
}

/** The server's own message from a client-node ApiException (its body is a JSON string), else the error text. */
export function apiErrorMessage(e: unknown): string {
  if (e instanceof ApiException) {
    try {
      const status = JSON.parse(String(e.body)) as { message?: string };
      if (status.message) return `HTTP ${e.code}: ${status.message}`;
    } catch {
      // not JSON: fall through
    }
    return `HTTP ${e.code}`;
  }
  return e instanceof Error ? e.message : String(e);
}
