/**
 * The SSE event store of one stateful MCP session (the SDK's EventStore hook): every message sent on
 * a stream gets an event id, so a client whose stream was cut resumes with `Last-Event-ID` and gets
 * what it missed, the result included. Bounded: per stream the newest 1,000 events or 1 MiB (the
 * newest event is always kept), 4 MiB for the whole session (older streams go first, whole), and
 * a stream is forgotten 60 s after the latest deadline of a run that started on it (the server's
 * ceiling) or after its last event, whichever is later. Without the session bound, every finished
 * call's result (megabytes, for a run that printed a megabyte per stream) stayed for a minute.
 */
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

export interface EventStoreLimits {
  maxEvents: number;
  maxBytes: number;
  /** Bytes of every stream of the session together: the oldest streams are dropped past it. */
  maxTotalBytes: number;
  /** The longest a run on a stream can take: the deadline ceiling. */
  deadlineMs: number;
  /** How long a stream is kept past that deadline or its last event. */
  graceMs: number;
}

export const EVENT_STORE_LIMITS: Omit<EventStoreLimits, 'deadlineMs'> = {
  maxEvents: 1000,
  maxBytes: 1024 * 1024,
  maxTotalBytes: 4 * 1024 * 1024,
  graceMs: 60_000,
};

interface Stored {
  seq: number;
  message: JSONRPCMessage;
  bytes: number;
}

interface Stream {
  events: Stored[];
  bytes: number;
  next: number;
  firstAt: number;
  lastAt: number;
}

const SEPARATOR = '/';

export class BoundedEventStore implements EventStore {
  /** In the order of their last event, oldest first. */
  private readonly streams = new Map<string, Stream>();
  private totalBytes = 0;
  private readonly limits: EventStoreLimits;
  private readonly now: () => number;

  constructor(limits: EventStoreLimits, now: () => number = Date.now) {
    this.limits = limits;
    this.now = now;
  }

  storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    this.expire();
    const now = this.now();
    const stream = this.streams.get(streamId) ?? { events: [], bytes: 0, next: 0, firstAt: now, lastAt: now };
    // Re-inserted: the map stays in the order of last events.
    this.streams.delete(streamId);
    this.streams.set(streamId, stream);
    const bytes = approximateJsonBytes(message);
    const seq = stream.next++;
    stream.events.push({ seq, message, bytes });
    stream.bytes += bytes;
    this.totalBytes += bytes;
    stream.lastAt = now;
    const { maxEvents, maxBytes, maxTotalBytes } = this.limits;
    while (stream.events.length > 1 && (stream.events.length > maxEvents || stream.bytes > maxBytes)) {
      const dropped = stream.events.shift()!.bytes;
      stream.bytes -= dropped;
      this.totalBytes -= dropped;
    }
    for (const [id, older] of this.streams) {
      if (this.totalBytes <= maxTotalBytes || older === stream) break;
      this.drop(id, older);
    }
    return Promise.resolve(`${streamId}${SEPARATOR}${seq}`);
  }

  getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    const parsed = parse(eventId);
    return Promise.resolve(parsed && this.streams.has(parsed.streamId) ? parsed.streamId : undefined);
  }

  /** Sends what followed `lastEventId` on its stream; an id the store no longer holds is refused. */
  async replayEventsAfter(
    lastEventId: string,
    { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> },
  ): Promise<string> {
    this.expire();
    const parsed = parse(lastEventId);
    const stream = parsed && this.streams.get(parsed.streamId);
    if (!parsed || !stream) throw new Error(`unknown or expired event id ${lastEventId}`);
    const oldest = stream.events[0]?.seq ?? stream.next;
    if (parsed.seq + 1 < oldest) throw new Error(`events after ${lastEventId} were dropped (stream bound)`);
    for (const e of stream.events) {
      // The priming event carries no message: nothing to replay.
      if (e.seq > parsed.seq && 'jsonrpc' in e.message)
        await send(`${parsed.streamId}${SEPARATOR}${e.seq}`, e.message);
    }
    return parsed.streamId;
  }

  /** Streams and bytes held, for tests and health. */
  get size(): { streams: number; events: number; bytes: number } {
    let events = 0;
    let bytes = 0;
    for (const s of this.streams.values()) {
      events += s.events.length;
      bytes += s.bytes;
    }
    return { streams: this.streams.size, events, bytes };
  }

  private expire(): void {
    const now = this.now();
    const { deadlineMs, graceMs } = this.limits;
    for (const [id, s] of this.streams) {
      if (Math.max(s.firstAt + deadlineMs, s.lastAt) + graceMs < now) this.drop(id, s);
    }
  }

  private drop(id: string, stream: Stream): void {
    this.streams.delete(id);
    this.totalBytes -= stream.bytes;
  }
}

/**
 * About the bytes `value` takes as JSON: its strings' UTF-8 lengths (without escapes) and a little
 * for the rest. Writing it out to measure would cost a tool result with a 100 KB image 1.5 to 4 ms,
 * on the reply's path (the SDK stores an event before it sends it).
 */
export function approximateJsonBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value) + 2;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value).length;
  if (value === null) return 4;
  if (typeof value !== 'object') return 0;
  let bytes = 2;
  if (Array.isArray(value)) {
    for (const item of value) bytes += approximateJsonBytes(item) + 1;
  } else {
    for (const [key, item] of Object.entries(value))
      bytes += Buffer.byteLength(key) + 4 + approximateJsonBytes(item);
  }
  return bytes;
}

function parse(eventId: string): { streamId: string; seq: number } | undefined {
  const at = eventId.lastIndexOf(SEPARATOR);
  const seq = Number(eventId.slice(at + 1));
  if (at <= 0 || !Number.isSafeInteger(seq) || seq < 0) return undefined;
  return { streamId: eventId.slice(0, at), seq };
}
