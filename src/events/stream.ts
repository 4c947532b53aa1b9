import { setTimeout as sleep } from 'node:timers/promises';

import type { Caller } from '../auth/caller.js';
import { readableBy } from '../auth/tenancy.js';
import { databaseUnreachable } from '../store/index.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { EventBus } from './bus.js';
import { CursorError, type CursorCodec, type Position } from './cursor.js';
import type { EventLog, EventRecord } from './log.js';
import { replayPage, type ReplayWindow } from './replay.js';

/** Events read from the log per query while a resumed stream replays. */
const REPLAY_PAGE = 200;
/**
 * How long a stream retries a read of the log that fails (PostgreSQL restarting, a failover) before it ends with the
 * error: a subscriber that starts, or resumes, while the database is briefly away keeps its subscription and gets
 * what was acknowledged once the database is back.
 */
const READ_RETRY_MS = 60_000;

/**
 * What one stream delivers, as options of the one EventStream rather than wrappers around it (docs/decisions/067):
 * which events (`kind`, `key`, `scope`, `reader`, `filter`), as what (`map`), and until when (`until`, `limit`).
 */
export interface StreamOptions<T = EventRecord> {
  kind: string;
  /** One key (auth_req_id, external id): the stored event first, then live ones. */
  key?: string;
  /**
   * With `key`: the key the events are kept under, when a domain may keep them under another spelling of the key a
   * subscriber names (a read of the domain's own, such as its ledger); null, or `key` itself, keeps `key`. Asked once,
   * in the stream's first read: beside the stored event's read under `key` (the common answer, `key`, costs no round
   * trip more), or before a resumed stream's replay; retried as that read is, so a subscriber that starts while the
   * database is away waits it out. Another key found moves the live listener to it before the log is read under it.
   * What it throws ends the stream with that error, as a failed read of the log does.
   */
  keyOf?: () => Promise<string | null>;
  /**
   * Only events this API-key scope owns, for streams over every key: not the shared ones, which an app reads by their
   * key (src/auth/tenancy.ts), so that a stream of its own events does not hand it every shared result.
   */
  scope?: string;
  /**
   * Only events this caller may read (src/auth/tenancy.ts): another key's event is skipped, stored or live, so
   * the stream looks exactly like one for an id that has no event yet.
   */
  reader?: Caller;
  /** Only the events it accepts, stored, replayed or live (checked after the others, in log order). */
  filter?: (e: EventRecord) => boolean;
  /**
   * What the stream yields for an event (default: the event). Called once per event the stream delivers; a view
   * that a shared execution should make once for all its subscribers belongs in the subscription's `resolve`.
   */
  map?: (e: EventRecord) => T;
  /**
   * A value yielded before any event (a domain's current state read from its own row): the stream listens and reads
   * the log only after it, so `filter` must pass only what is newer. With `until` true for it, the stream ends there.
   */
  initial?: T;
  /** A terminal value: the stream ends after yielding it (a provisioning that SUCCEEDED or FAILED). */
  until?: (value: T) => boolean;
  /** Ends the stream after this many events (a mobile-ID authentication completes once). */
  limit?: number;
  /**
   * Resume after this position (a decoded cursor, src/events/cursor.ts, or one a domain took from the bus before it
   * read its `initial` value): the events outside it are replayed from the log, oldest first, then live ones follow,
   * each once. With `key`, replaces the stored event.
   */
  after?: Position;
  /**
   * With `after` decoded from a client's cursor: when that cursor was handed out. Each read of the replay then reads
   * the retention purge's watermark too (src/events/replay.ts), one row per page, and ends the stream when events it
   * had still to read were purged: before it yields anything when the first read finds it (an event is kept for the
   * EVENT_RETENTION in force when it was stored, so a cursor young enough for today's retention may still precede
   * purged events), after the events of the pages read before when a purge ran during the replay (their cursors then
   * resume into the same refusal). Read there, not before the stream, so that a resume while the database is away
   * waits it out as the replay does.
   */
  cursorAt?: number;
  /** What the stream throws when it refuses its cursor (`cursorAt`): its transport's words, else the CursorError. */
  refused?: (err: CursorError) => unknown;
  /**
   * With `after` and `key`: whether an event the cursor covers ended the stream its holder resumes (a result under
   * `limit: 1`, a terminal state under `until`). Asked of the newest event of the key inside `after` that `scope` and
   * `reader` let through (not `filter`), read from the log before the replay; true finishes the stream at once,
   * yielding nothing, as the resumed stream finished after that event. Without it a resume only sends what is outside
   * the cursor, and a stream that ended inside it would wait for an event that never comes.
   */
  endedWithin?: (e: EventRecord) => boolean;
  /**
   * With `key` and `after`: the replay yields only the newest event outside the cursor that the stream accepts (the
   * one a stream without `after` reads as its stored event), not each in turn from the oldest. For a stream that ends
   * after one event (a mobile-ID authentication, `limit: 1`), so that it delivers the result a read returns whether it
   * is resumed or not. Its cursor covers the older ones it passed over.
   */
  newestOnResume?: boolean;
  /**
   * When the caller's credential expires (a JWT's `exp`, ms on the gateway clock): no event, stored, replayed or live,
   * is handed out at or after it; the stream ends instead, as the transport's scheduled end at the expiry would end it
   * (that end may run late: a timer firing late, a clock moved past it). One comparison per event.
   */
  endAt?: number;
}

/** A resume from a client's cursor, as a domain hands it on to its stream (StreamOptions). */
export type Resume = Pick<StreamOptions, 'after' | 'cursorAt' | 'refused'>;

/**
 * `read`, again after a failure to reach the database (backing off up to 2 s) until READ_RETRY_MS have passed or
 * `stopped()`: what a stream reads before its first event (the log, or a domain's row) waits out a restarting database.
 */
export async function readWaitingOut<T>(read: () => Promise<T>, stopped: () => boolean = () => false): Promise<T> {
  const deadline = Date.now() + READ_RETRY_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      const wait = Math.min(2_000, 100 * 2 ** attempt);
      // Only a database that is away is waited out; a failing statement (SQLite's or PostgreSQL's) ends the stream now.
      if (stopped() || !databaseUnreachable(err) || Date.now() + wait > deadline) throw err;
      await sleep(wait);
      if (stopped()) throw err;
    }
  }
}

/**
 * What ends a stream that is waiting for an event: an AbortSignal, or the lighter StreamCancel (a listener
 * on an AbortSignal costs memory, and every idle subscription holds one; decision 006, Measurements, step 4).
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
 * Subscriptions over the event log and bus. The live listener is registered BEFORE the log is read, and a live
 * event at or below the stored one's sequence is dropped, so an event that arrives while the stored one is being
 * read is neither lost (gap) nor yielded twice (duplicate).
 */
export class EventStreams {
  constructor(
    private readonly log: EventLog,
    private readonly bus: EventBus,
    readonly cursors: CursorCodec,
    private readonly tracing?: Tracing,
    /** The gateway's clock, which a stream's `endAt` is read on (the one the transports' expiry is scheduled on). */
    readonly now: () => number = Date.now,
  ) {}

  /** A delivery span per event and subscriber, linked to the event's intake span (meta.traceparent, see Events.ingest). */
  delivered(e: EventRecord): void {
    if (!this.tracing?.enabled) return;
    const traceparent = typeof e.meta.traceparent === 'string' ? e.meta.traceparent : undefined;
    this.tracing.delivery(`deliver ${e.kind} event`, traceparent, {
      'gateway.event.kind': e.kind,
      'gateway.event.seq': e.seq,
    });
  }

  /**
   * The stream of `filter`'s events: the stored one first (for a key), then live ones, until `limit` events, the
   * signal, or `return()`. A plain iterator rather than an async generator (docs/decisions/034): a live event is
   * handed straight to the waiting `next()`, one promise per event instead of a generator's resume, its awaited
   * `yield` and the consumer's promise, which at 1,000 subscribers of one event was a measurable share of the
   * fan-out (bench scenario 5). Like a generator it starts (listens, reads the log) at its first `next()`.
   */
  subscribe<T = EventRecord>(options: StreamOptions<T>, signal?: CancelSignal): AsyncGenerator<T> {
    return new EventStream<T>(this, this.log, this.bus, options, signal);
  }
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * What a stream's `nextTo` answers, in place of the promise `next()` returns: a consumer that waits for every event of
 * its stream (src/execution/run.ts, for a transport that writes each result itself) is the waiter itself, so that a
 * waiting subscription holds no promise, no resolving functions and no reaction. Either method may be called at once,
 * from within `nextTo` or from a publish: a waiter hands the answer on later itself, as a promise's reaction would run.
 */
export interface Waiter<T> {
  resolve(result: IteratorResult<T>): void;
  reject(err: unknown): void;
}

/** A stream that can answer a waiter instead of a promise (EventStream's `nextTo`). */
export interface WaiterStream<T> {
  nextTo(waiter: Waiter<T>): void;
}

/** See EventStreams.subscribe. */
class EventStream<T> implements AsyncGenerator<T>, WaiterStream<T> {
  /** Live events not yet taken by `next()` (null when none). */
  private queue: EventRecord[] | null = null;
  /** The `next()` (or `nextTo`) waiting for an event. */
  private waiting: Waiter<T> | null = null;
  private started = false;
  /** The read of the stored event (for a key), until it settles. */
  private reading: Promise<void> | null = null;
  private done = false;
  /** On one key, the sequence number of the stored event read at the start (0: none): see `behindStored`. */
  private storedSeq = 0;
  private yielded = 0;
  private unsubscribe: (() => void) | null = null;
  /** Made when a signal is given (most streams have none, and a waiting stream keeps what it made). */
  private onAbort: (() => void) | null = null;
  /** While a resumed stream replays: what the bus had delivered when the stream started listening, and the next page's start. */
  private replay: (ReplayWindow & { page: EventRecord[] }) | null = null;
  /**
   * The part of a resume cursor this replica had not delivered when the stream started (a cursor from a replica that
   * was ahead): live events in it were delivered before, and each live event's cursor must still cover it. Null
   * once the bus covers it, which is the common case from the start.
   */
  private ahead: Position | null = null;
  /** Whether a resumed stream asked if its cursor covers the event that ended it (StreamOptions.endedWithin). */
  private endChecked = false;

  constructor(
    private readonly streams: EventStreams,
    private readonly log: EventLog,
    private readonly bus: EventBus,
    /** The options; replaced once, by the same with the key found, when `keyOf` is asked (`keyIs`). */
    private filter: StreamOptions<T>,
    private readonly signal: CancelSignal | undefined,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  private matches(e: EventRecord): boolean {
    const f = this.filter;
    return (
      (f.key === undefined || e.key === f.key) &&
      // One owner's events, never the shared ones (not readableBy, src/auth/tenancy.ts): see StreamOptions.scope.
      (f.scope === undefined || e.scope === f.scope) &&
      (f.reader === undefined || readableBy(f.reader, e.scope)) &&
      (f.filter === undefined || f.filter(e))
    );
  }

  private start(): void {
    this.started = true;
    // A stream that ended on its `initial` value listens for nothing (a consumer may still ask again: graphql-sse does).
    if (this.done) return;
    const f = this.filter;
    // The live listener goes first, and a live event at or below the stored one is dropped, so an event that arrives
    // while the stored one is read is neither lost (gap) nor yielded twice (duplicate). The bus delivers each event
    // once, not always in sequence order (an insert can commit after a later one, two webhooks publish in the order
    // they are answered): every other live event is yielded, as it comes.
    this.listen(f.kind, f.key ?? null);
    if (this.signal) this.signal.addEventListener('abort', (this.onAbort = () => this.finish()));
    if (f.after !== undefined) {
      // Taken after the listener is registered (synchronously): every event outside `until` comes live.
      const until = this.bus.position();
      if (!until.covers(f.after)) this.ahead = f.after;
      this.replay = { after: f.after, until, from: f.after.floor, cursorAt: f.cursorAt, checked: false, page: [] };
      return;
    }
    if (f.key === undefined) return;
    let until = this.bus.position();
    // When `until` was taken, on the gateway clock (the one events are stamped and the purge runs on): the stored
    // event's cursor is dated by it, not by the event's receipt (see below).
    let untilAt = this.streams.now();
    const key = f.key;
    const latest =
      f.keyOf === undefined
        ? () => this.log.latest(f.kind, key, f.reader)
        : async () => {
            // On a retry after the key was found, only the read under it is tried again.
            const named = this.filter;
            if (named.keyOf === undefined) return this.log.latest(f.kind, named.key!, f.reader);
            const [found, stored] = await Promise.all([named.keyOf(), this.log.latest(f.kind, key, f.reader)]);
            const moved = this.keyIs(found);
            if (moved === null) return stored;
            until = moved;
            untilAt = this.streams.now();
            return this.log.latest(f.kind, this.filter.key!, f.reader);
          };
    this.reading = this.retried(latest).then(
      (stored) => {
        this.reading = null;
        if (stored && !this.done && this.matches(stored)) {
          // What the bus had delivered when the stream started listening, and the stored event: nothing more. The
          // numbers below it that are outside `until` may belong to another key's events that commit later (on
          // PostgreSQL), and a cursor is not bound to its stream: one claiming them would make a stream of every key
          // resumed from it skip those events. Nothing delivered live later is inside `until`.
          until.add(stored.seq);
          // Dated when `until` was taken, not when the stored event was received: a cursor's date stands for the
          // events outside its position, which a resume must still find in the log (the EVENT_RETENTION check of
          // CursorCodec.decode), and those are delivered after `until` was taken, as a live event's cursor is dated
          // by that event. The stored event's own date, days older for an old result, made a resume refused as
          // expired days before anything it needs could be purged. (An event received a moment before, on its way
          // from another replica, is caught as for any cursor: by the purge's watermark, read at every resume.)
          stored.cursor = this.streams.cursors.encode(until, untilAt);
          // What came live during the read at or below it is the stored event itself, or older: dropped here once,
          // later ones on arrival (`behindStored`).
          this.storedSeq = stored.seq;
          const queued = this.queue;
          this.queue = queued === null ? [stored] : [stored, ...queued.filter((e) => e.seq > stored.seq)];
        }
        this.wake();
      },
      (err: unknown) => {
        this.reading = null;
        // The `next()` waiting for this read fails with its error (nothing else waits for it).
        const waiting = this.waiting;
        this.waiting = null;
        this.finish();
        waiting?.reject(err);
      },
    );
  }

  /** Registers the live listener on `key` (null: every key of `kind`): see `start` for what it yields. */
  private listen(kind: string, key: string | null): void {
    this.unsubscribe = this.bus.subscribe(kind, key, (event) => {
      if (this.done || !this.matches(event)) return;
      const e = this.ahead === null ? event : this.beyondAhead(event);
      if (e === null || this.behindStored(e)) return;
      const waiting = this.waiting;
      if (waiting !== null && this.reading === null) {
        this.waiting = null;
        waiting.resolve(this.take(e));
        return;
      }
      (this.queue ??= []).push(e);
    });
  }

  /**
   * The key `keyOf` found (StreamOptions.keyOf; null: the one named) becomes the stream's. Another key than the one
   * named moves the live listener to it, dropping what came live under the named one (not this stream's events), and
   * returns the bus's position taken after the new listener is registered (synchronously, as `start` takes it): the
   * log is read under the new key only after that, so that each of its events comes either from the log or live.
   * Null when the key stays, or the stream has ended (it listens to nothing any more).
   */
  private keyIs(found: string | null): Position | null {
    const { keyOf: _asked, ...f } = this.filter;
    const key = found ?? f.key!;
    const named = f.key;
    this.filter = { ...f, key };
    if (key === named || this.done) return null;
    this.unsubscribe!();
    this.queue = null;
    this.listen(f.kind, key);
    return this.bus.position();
  }

  /**
   * After the stored event's read: the waiting `next()` gets what is queued (the stored event, or live ones that came
   * during the read), or the end when the stream is over; else it keeps waiting for a live event.
   */
  private wake(): void {
    const waiting = this.waiting;
    if (waiting === null || this.done) return;
    // Taken out first: the end, or a last event's `take`, finishes the stream, which would answer it with the end.
    this.waiting = null;
    const ready = this.ready();
    if (ready !== null) waiting.resolve(ready);
    else this.waiting = waiting;
  }

  /** Without waiting: the end (the limit reached or the signal aborted: the stream finishes), a queued event, or null. */
  private ready(): IteratorResult<T> | null {
    if (this.yielded >= (this.filter.limit ?? Infinity) || this.signal?.aborted) {
      this.finish();
      return DONE;
    }
    return this.fromQueue();
  }

  /**
   * A live event as this stream delivers it while its resume cursor is ahead of the bus: null when the cursor holds
   * it (delivered before), else with a cursor that covers both.
   */
  private beyondAhead(e: EventRecord): EventRecord | null {
    const ahead = this.ahead!;
    if (ahead.has(e.seq)) return null;
    const at = e.receivedAt.getTime();
    const bus = this.bus.position();
    if (bus.covers(ahead)) {
      this.ahead = null;
      return e;
    }
    // A copy: the event object is shared with the other subscribers, whose cursor is the bus's.
    return { ...e, cursor: this.streams.cursors.encode(bus.union(ahead), at) };
  }

  /** The next page of a resumed stream's replay (an empty page once it is over: `replay` is then null). */
  private async readPage(): Promise<void> {
    const r = this.replay!;
    const f = this.filter;
    const only = { key: f.key, scope: f.scope, reader: f.reader };
    // A copy of the window: a read that fails is tried again from the same place (the watermark's check with it).
    const window: ReplayWindow = { after: r.after, until: r.until, from: r.from, cursorAt: r.cursorAt };
    const page = await this.retried(() => {
      window.from = r.from;
      window.checked = r.checked;
      return replayPage(this.log, this.streams.cursors, window, [f.kind], only, REPLAY_PAGE, (e) => this.matches(e));
    });
    r.from = window.from;
    r.checked = window.checked;
    r.page.push(...page);
    // One key's events, so few: every page is read before the newest is yielded (`fromReplay`).
    if (f.newestOnResume === true && r.page.length > 1) r.page.splice(0, r.page.length - 1);
    if (r.page.length === 0 && r.from >= r.until.max()) this.replay = null;
  }

  /** `read`, again after a failure to reach the database until READ_RETRY_MS have passed or the stream ended. */
  private retried<T>(read: () => Promise<T>): Promise<T> {
    return readWaitingOut(read, () => this.done);
  }

  /**
   * Whether the newest event of the key inside the resume cursor ended the stream (StreamOptions.endedWithin); asked
   * once, before the replay. The key's events up to the cursor's highest number are read in pages (few: one key's).
   */
  private async endedBeforeResume(): Promise<boolean> {
    this.endChecked = true;
    const f = this.filter;
    if (f.endedWithin === undefined || f.key === undefined || f.after === undefined) return false;
    const after = f.after;
    const only = { key: f.key, scope: f.scope, reader: f.reader };
    const to = after.max();
    let newest: EventRecord | null = null;
    for (let from = 0; from < to && !this.done;) {
      const start = from;
      const rows = await this.retried(() => this.log.range([f.kind], start, to, only, REPLAY_PAGE));
      // `has`, not the floor alone: a cursor from a replica that was ahead holds stretches above its floor.
      for (const e of rows) if (after.has(e.seq)) newest = e;
      if (rows.length < REPLAY_PAGE) break;
      from = rows[rows.length - 1]!.seq;
    }
    return newest !== null && f.endedWithin(newest);
  }

  /**
   * A resumed stream whose listener moved to another key (`keyIs`) at `until` (null: it did not move): the replay reads
   * up to that position, and what is outside it comes live, as `start` sets the window up.
   */
  private resumeUnder(until: Position | null): void {
    const r = this.replay;
    if (until === null || r === null) return;
    r.until = until;
    this.ahead = until.covers(r.after) ? null : r.after;
  }

  /** The next replayed event, reading pages as needed; null once the replay is over. */
  private async fromReplay(): Promise<IteratorResult<T> | null> {
    while (this.replay !== null && !this.done) {
      const r = this.replay;
      if (r.page.length > 0 && (this.filter.newestOnResume !== true || r.from >= r.until.max())) {
        const e = r.page.shift()!;
        if (r.page.length === 0 && r.from >= r.until.max()) this.replay = null;
        return this.take(e);
      }
      // With nothing to replay, the cursor is still checked against the purge: events after it may be gone from
      // the log though this replica never delivered them (it started after their purge).
      if (r.from >= r.until.max() && (r.cursorAt === undefined || r.checked === true)) {
        this.replay = null;
        break;
      }
      await this.readPage();
    }
    return null;
  }

  /**
   * On one key, whether live `e` is the stored event, or older: the stored event is the key's newest, as a read
   * returns it, and an older one committing late does not replace it. Its cursor does not claim such an event (a
   * cursor also resumes streams of every key), so a resume from it delivers the event: sent, never skipped. Not
   * whether it is below the last event yielded: two events received together may be published in the reverse of their
   * log order (docs/decisions/061), and the lower one, coming second, is no copy of anything yielded. A resumed stream
   * reads no stored event: what it replays is inside the bus's position when it started, what comes live outside it.
   */
  private behindStored(e: EventRecord): boolean {
    return e.seq <= this.storedSeq;
  }

  /** `e` as the stream's next result, counted; the stream stops listening at once after its last one. */
  private take(e: EventRecord): IteratorResult<T> {
    if (this.expired()) return DONE;
    this.yielded += 1;
    this.streams.delivered(e);
    const f = this.filter;
    const value = f.map === undefined ? (e as T) : f.map(e);
    if (this.yielded >= (f.limit ?? Infinity) || (f.until !== undefined && f.until(value))) this.finish();
    return { done: false, value };
  }

  /** Whether the caller's credential has expired (StreamOptions.endAt): the stream is then finished. */
  private expired(): boolean {
    const endAt = this.filter.endAt;
    if (endAt === undefined || this.streams.now() < endAt) return false;
    this.finish();
    return true;
  }

  /** The next queued event (the stored one first), if any. */
  private fromQueue(): IteratorResult<T> | null {
    const e = this.queue?.shift();
    return e === undefined ? null : this.take(e);
  }

  /**
   * Not an async function: a stream waiting for its event holds the one promise made here, and a live event settles it
   * at once (an async function's own promise would adopt it: a second promise, its reaction and a job per event).
   */
  next(): Promise<IteratorResult<T>> {
    return new Promise<IteratorResult<T>>((resolve, reject) => this.nextTo({ resolve, reject }));
  }

  /**
   * `next()`, answered to `waiter`: the end, a queued event, or, once it comes, the next live one (while the stored
   * event is read: what the read finds). The replay of a resumed stream and an `initial` value take the async path.
   */
  nextTo(waiter: Waiter<T>): void {
    if (this.replay !== null || (!this.started && !this.done && this.filter.initial !== undefined))
      return this.answerSlowly(waiter);
    if (!this.started) {
      this.start();
      if (this.replay !== null) return this.answerSlowly(waiter);
    }
    if (this.done) return waiter.resolve(DONE);
    // While the stored event is read, its read answers the waiting `next()` (wake).
    if (this.reading === null) {
      const ready = this.ready();
      if (ready !== null) return waiter.resolve(ready);
    }
    if (this.waiting !== null) return waiter.reject(new Error('EventStream: next() called while another next() waits'));
    this.waiting = waiter;
  }

  private answerSlowly(waiter: Waiter<T>): void {
    this.nextSlowly().then(
      (result) => waiter.resolve(result),
      (err: unknown) => waiter.reject(err),
    );
  }

  /** `next()` for a stream with an `initial` value not yet yielded, or replaying a resume. */
  private async nextSlowly(): Promise<IteratorResult<T>> {
    if (!this.started && !this.done && this.filter.initial !== undefined) {
      if (this.expired()) return DONE;
      const value = this.filter.initial;
      this.yielded += 1;
      if (this.yielded >= (this.filter.limit ?? Infinity) || this.filter.until?.(value) === true) this.finish();
      else this.start();
      return { done: false, value };
    }
    if (!this.started) this.start();
    if (this.done) return DONE;
    if (this.yielded >= (this.filter.limit ?? Infinity) || this.signal?.aborted) {
      this.finish();
      return DONE;
    }
    if (this.replay !== null) {
      let replayed: IteratorResult<T> | null;
      try {
        // The key is found before anything is read from the log under it (StreamOptions.keyOf).
        if (this.filter.keyOf !== undefined) this.resumeUnder(this.keyIs(await this.retried(this.filter.keyOf)));
        if (!this.endChecked && (await this.endedBeforeResume())) {
          this.finish();
          return DONE;
        }
        replayed = await this.fromReplay();
      } catch (err) {
        this.finish();
        throw err instanceof CursorError && this.filter.refused !== undefined ? this.filter.refused(err) : err;
      }
      if (replayed !== null) return replayed;
      if (this.done) return DONE;
    }
    return this.next();
  }

  /** Stops listening; a waiting `next()` gets the end of the stream. */
  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.queue = null;
    this.unsubscribe?.();
    this.unsubscribe = null;
    if (this.onAbort) this.signal?.removeEventListener('abort', this.onAbort);
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.resolve(DONE);
  }

  /**
   * Whether `next()` can only answer the end: the stream ended with the last event it yielded (`limit`, `until`) or
   * was stopped, and no read is pending. A consumer that checks it ends without asking again (src/execution/run.ts).
   */
  get finished(): boolean {
    return this.done && this.reading === null;
  }

  async return(): Promise<IteratorResult<T>> {
    this.finish();
    return DONE;
  }

  async throw(err: unknown): Promise<IteratorResult<T>> {
    this.finish();
    throw err;
  }

  get [Symbol.toStringTag](): string {
    return 'EventStream';
  }
}
