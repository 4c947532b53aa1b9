import type { Caller } from '../caller.js';
import { readableBy } from '../tenancy.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { EventBus } from './bus.js';
import type { EventLog, EventRecord } from './log.js';

export interface StreamFilter {
  kind: string;
  /** One key (auth_req_id, external id): the stored event first, then live ones. */
  key?: string;
  /** Only events of this API-key scope (for streams over every key). */
  scope?: string;
  /**
   * Only events this caller may read (src/tenancy.ts): another key's event is skipped, stored or live, so
   * the stream looks exactly like one for an id that has no event yet.
   */
  reader?: Caller;
  /** Ends the stream after this many events (a mobile-ID authentication completes once). */
  limit?: number;
}

/**
 * What ends a stream that is waiting for an event: an AbortSignal, or the lighter StreamCancel (a listener
 * on an AbortSignal costs about 0.9 KB, and every idle subscription holds one; bench scenario 5).
 */
export interface CancelSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** A one-shot cancellation for a stream: `abort()` calls the listeners once. */
export class StreamCancel implements CancelSignal {
  aborted = false;
  private listeners: Array<() => void> | null = null;

  addEventListener(_type: 'abort', listener: () => void): void {
    (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const i = this.listeners?.indexOf(listener) ?? -1;
    if (i !== -1) this.listeners!.splice(i, 1);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners ?? [];
    this.listeners = null;
    for (const listener of listeners) listener();
  }
}

/**
 * Subscriptions over the event log and bus. The live listener is registered BEFORE the log is read, and
 * events are ordered by their log sequence, so an event that arrives while the stored one is being read
 * is neither lost (gap) nor yielded twice (duplicate).
 */
export class EventStreams {
  constructor(
    private readonly log: EventLog,
    private readonly bus: EventBus,
    private readonly tracing?: Tracing,
  ) {}

  /** A delivery span per event and subscriber, linked to the event's intake span (meta.traceparent, see Events.ingest). */
  private delivered(e: EventRecord): void {
    if (!this.tracing?.enabled) return;
    const traceparent = typeof e.meta.traceparent === 'string' ? e.meta.traceparent : undefined;
    this.tracing.delivery(`deliver ${e.kind} event`, traceparent, { 'gateway.event.kind': e.kind, 'gateway.event.seq': e.seq });
  }

  async *subscribe(filter: StreamFilter, signal?: CancelSignal): AsyncGenerator<EventRecord> {
    const matches = (e: EventRecord) =>
      (filter.key === undefined || e.key === filter.key) &&
      (filter.scope === undefined || e.scope === filter.scope) &&
      (filter.reader === undefined || readableBy(filter.reader, e.scope));
    const queue: EventRecord[] = [];
    let wake: (() => void) | null = null;
    const unsubscribe = this.bus.subscribe(filter.kind, filter.key ?? null, (e) => {
      if (!matches(e)) return;
      queue.push(e);
      wake?.();
    });
    const onAbort = () => wake?.();
    signal?.addEventListener('abort', onAbort);
    let lastSeq = 0;
    let yielded = 0;
    const limit = filter.limit ?? Infinity;
    try {
      if (filter.key !== undefined) {
        const stored = await this.log.latest(filter.kind, filter.key);
        if (stored && matches(stored)) {
          lastSeq = stored.seq;
          yielded += 1;
          this.delivered(stored);
          yield stored;
        }
      }
      while (yielded < limit && !signal?.aborted) {
        const next = queue.shift();
        if (next) {
          if (next.seq <= lastSeq) continue;
          lastSeq = next.seq;
          yielded += 1;
          this.delivered(next);
          yield next;
          continue;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = null;
      }
    } finally {
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
    }
  }
}
