import { CursorCodec, Delivered, type Position } from './cursor.js';
import type { EventRecord } from './log.js';

export type EventListener = (event: EventRecord) => void;

/**
 * Carries appended events to subscribers. In-process by default; a PostgreSQL LISTEN/NOTIFY bus (events
 * crossing replicas) implements the same interface.
 */
export interface EventBus {
  publish(event: EventRecord): Promise<void>;
  /**
   * Calls `listener` for every event of `kind` (and of `key`, unless it is null) published from now on;
   * returns the unsubscribe function.
   */
  subscribe(kind: string, key: string | null, listener: EventListener): () => void;
  /**
   * How many listeners this process has subscribed to events of `kind`: to those of `key` (null: the subscriptions to
   * every key of the kind), or without `key`, all of them. Tests wait on it before they publish.
   */
  subscribers(kind: string, key?: string | null): number;
  /**
   * What this replica has delivered so far, as a position in the log (src/events/cursor.ts): a copy, taken after a
   * subscriber starts listening, so that every event outside it reaches that subscriber live.
   */
  position(): Position;
  close(): Promise<void>;
}

/** Listeners by kind and key, so a publish touches only the subscribers of that key (fan-out is O(matching)). */
export class InProcessBus implements EventBus {
  /**
   * One entry per key with an open subscription, removed with its last subscriber (unsubscribe at complete or close):
   * the listener itself while it is the key's only one (the common case: a mobile-ID subscription waits on its own
   * auth_req_id), a Set once a second one comes. A lone listener costs no Set to make at subscribe, to iterate at
   * publish and to shrink and drop at its end (decision 108).
   */
  private readonly listeners = new Map<string, EventListener | Set<EventListener>>();
  private delivered: Delivered;

  /**
   * `floor`: the highest sequence number in the log when the bus starts (events before it are not published again);
   * `cursors`: what seals each event's cursor (the gateway's, from its secret).
   */
  constructor(
    floor = 0,
    private readonly cursors: CursorCodec = CursorCodec.random(),
  ) {
    this.delivered = new Delivered(floor, cursors);
  }

  /**
   * Starts the positions again from `floor`, with `above` (numbers above it) counted as delivered: the PostgreSQL bus,
   * once it has read the log's newest numbers (those missing between them may still commit, and are not delivered).
   */
  startAt(floor: number, above: readonly number[] = []): void {
    this.delivered = new Delivered(floor, this.cursors);
    for (const seq of above) this.delivered.record(seq, 0, false);
  }

  position(): Position {
    return this.delivered.snapshot();
  }

  /** Every number up to this one has been delivered (or given up as a hole): no copy made. */
  deliveredThrough(): number {
    return this.delivered.floor();
  }

  /** The numbers below `seq` not delivered here (nor given up), as stretches. */
  holesBelow(seq: number): [number, number][] {
    return this.delivered.holesBelow(seq);
  }

  async publish(event: EventRecord): Promise<void> {
    const byKey = this.listeners.get(`${event.kind}\u0000${event.key}`);
    const byKind = this.listeners.get(`${event.kind}\u0000*`);
    // Its cursor, once for every subscriber (the position is known without reading anything), and only when this
    // replica has one: the listeners are the only readers of a published event's cursor.
    event.cursor = this.delivered.record(
      event.seq,
      event.receivedAt.getTime(),
      byKey !== undefined || byKind !== undefined,
    );
    if (byKey !== undefined) call(byKey, event);
    if (byKind !== undefined) call(byKind, event);
  }

  subscribe(kind: string, key: string | null, listener: EventListener): () => void {
    const slot = `${kind}\u0000${key ?? '*'}`;
    const there = this.listeners.get(slot);
    if (there === undefined) this.listeners.set(slot, listener);
    else if (typeof there === 'function') this.listeners.set(slot, new Set([there, listener]));
    else there.add(listener);
    return () => {
      const now = this.listeners.get(slot);
      if (now === listener) this.listeners.delete(slot);
      else if (typeof now === 'object' && now.delete(listener) && now.size === 0) this.listeners.delete(slot);
    };
  }

  subscribers(kind: string, key?: string | null): number {
    if (key !== undefined) return count(this.listeners.get(`${kind}\u0000${key ?? '*'}`));
    let n = 0;
    for (const [slot, entry] of this.listeners) if (slot.startsWith(`${kind}\u0000`)) n += count(entry);
    return n;
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}

/** Calls a key's listener, or each of its listeners (one that unsubscribes while called is not called again). */
function call(entry: EventListener | Set<EventListener>, event: EventRecord): void {
  if (typeof entry === 'function') entry(event);
  else for (const listener of entry) listener(event);
}

/** How many listeners an entry of InProcessBus's is. */
function count(entry: EventListener | Set<EventListener> | undefined): number {
  return entry === undefined ? 0 : typeof entry === 'function' ? 1 : entry.size;
}
