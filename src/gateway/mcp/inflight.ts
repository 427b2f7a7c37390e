/**
 * Stateless HTTP: a client's `notifications/cancelled` arrives in a request of its own, so it cannot
 * reach the server instance running the call. Calls in flight are kept by (principal, JSON-RPC id);
 * a cancellation aborts the call it names when exactly one matches. Two clients of one principal
 * that use the same id at once make it ambiguous: then nothing is cancelled (their runs end at
 * their deadline), so no one cancels someone else's run.
 */
interface Message {
  id?: unknown;
  method?: unknown;
  params?: { requestId?: unknown };
}

const messages = (body: unknown): Message[] =>
  (Array.isArray(body) ? body : [body]).filter((m): m is Message => typeof m === 'object' && m !== null);

export class InflightCalls {
  private readonly calls = new Map<string, Set<() => void>>();

  /** Remembers the requests in `body`; the returned function forgets them. */
  track(principal: string, body: unknown, cancel: () => void): () => void {
    const keys = messages(body)
      .filter((m) => m.id !== undefined && typeof m.method === 'string')
      .map((m) => key(principal, m.id));
    for (const k of keys) {
      const set = this.calls.get(k) ?? new Set();
      set.add(cancel);
      this.calls.set(k, set);
    }
    return () => {
      for (const k of keys) {
        const set = this.calls.get(k);
        set?.delete(cancel);
        if (set?.size === 0) this.calls.delete(k);
      }
    };
  }

  /** Applies the cancellations in `body`; returns how many calls were aborted. */
  cancelFrom(principal: string, body: unknown): number {
    let cancelled = 0;
    for (const m of messages(body)) {
      if (m.method !== 'notifications/cancelled' || m.params?.requestId === undefined) continue;
      const set = this.calls.get(key(principal, m.params.requestId));
      if (set?.size === 1) {
        for (const cancel of set) cancel();
        cancelled++;
      }
    }
    return cancelled;
  }

  get size(): number {
    return this.calls.size;
  }
}

const key = (principal: string, id: unknown): string => `${principal}\0${JSON.stringify(id)}`;
