import type { Caller } from '../auth/caller.js';
import { readableBy } from '../auth/tenancy.js';
import type { EventBus } from './bus.js';
import { CursorError, type CursorCodec, type Position } from './cursor.js';
import type { EventLog, EventRecord } from './log.js';
import { replayPage, type ReplayWindow } from './replay.js';
import type { CancelSignal } from './stream.js';

/** The most events one read returns, whatever is asked. */
const MAX_LIMIT = 1000;
/** The longest wait for events, whatever is asked. */
const MAX_WAIT_SECONDS = 3600;

/** Events after a cursor, oldest first, and the cursor to read after them next time. */
export interface EventsPage {
  /** Each with its own `cursor`: the position just after it. */
  events: EventRecord[];
  /** Resume here: after the last event returned, or where the log stands when none came. */
  cursor: string;
}

/** What waitForEvents found. */
export interface WaitedPage extends EventsPage {
  /** The wait ended with no event. */
  timedOut: boolean;
  /** Where `events` start: resuming here reads them again (a wait that must not hand them out now answers it). */
  since: string;
}

export interface WaitForEvents {
  /** Resume after this cursor; absent: from now on (only events that arrive during the wait). */
  cursor?: string | null;
  /** Event kinds to read (`mobile-id`, `verification`, `identification`, `provisioning`). */
  kinds: readonly string[];
  /** How long to wait when nothing is there yet (0..3600). */
  timeoutSeconds: number;
  /** Ends the wait early (the client went away): the page is then empty. */
  signal?: CancelSignal;
  /** Most events returned (1..1000, default 100). */
  limit?: number;
  /**
   * Admits the call (spends its rate-limit point) once its cursor is taken, before anything is read or waited: a
   * cursor this gateway cannot take is bad input, and bad input spends nothing. Resolves to what gives the point back
   * when the first read refuses the cursor after all (one before events the retention purge deleted).
   */
  admit?: () => Promise<(() => Promise<void>) | void>;
}

/**
 * The app's own events read after a cursor, for transports that poll rather than hold a stream (MCP's
 * `wait_for_events`): transport-neutral, owner-scoped (only events of the caller's scope, never another app's nor the
 * shared ones), and resumable on any replica, since the log is shared and a cursor is a position in it
 * (src/events/cursor.ts, docs/decisions/061). A cursor this gateway did not hand out, or one older than
 * EVENT_RETENTION, throws CursorError; so does one before events the retention purge deleted, found by the first read
 * (src/events/replay.ts, which checks each page it reads), after `admit`.
 */
export class EventReader {
  constructor(
    private readonly log: EventLog,
    private readonly bus: EventBus,
    private readonly cursors: CursorCodec,
    /** The clock a cursor's age is read on: the retention purge's (the gateway's). */
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Up to `limit` of the caller's events of these kinds after `cursor` (absent: none, and the cursor of now), oldest
   * first. Returns at once. Only events this replica has delivered are read, so that what is not read yet comes after
   * the returned cursor, here or on any replica.
   */
  async eventsAfter(
    caller: Caller,
    cursor: string | null | undefined,
    kinds: readonly string[],
    limit = 100,
  ): Promise<EventsPage> {
    if (!cursor) return this.read(caller, this.bus.position(), this.bus.position(), kinds, limit);
    const given = this.cursors.decode(cursor, this.log.retentionMs, this.now());
    return this.read(caller, given.position, this.bus.position(), kinds, limit, given.at);
  }

  /**
   * Like eventsAfter, but when no event is there yet, waits on the bus (no polling) until one of the caller's events
   * of these kinds is delivered, the timeout, or the signal. `timedOut`: the wait ended with no event.
   */
  async waitForEvents(caller: Caller, options: WaitForEvents): Promise<WaitedPage> {
    const given = options.cursor ? this.cursors.decode(options.cursor, this.log.retentionMs, this.now()) : null;
    const after = given?.position ?? null;
    const refund = await options.admit?.();
    const limit = options.limit ?? 100;
    let wake: (() => void) | null = null;
    let woken = false;
    const listener = (e: EventRecord) => {
      // Own events only, as `read` (not readableBy, src/auth/tenancy.ts): a shared one would wake it for nothing.
      if (e.scope !== caller.scope || woken) return;
      woken = true;
      wake?.();
    };
    // Listening first: an event delivered between the read below and the wait wakes it.
    const unsubscribe = [...new Set(options.kinds)].map((kind) => this.bus.subscribe(kind, null, listener));
    try {
      const start = after ?? this.bus.position();
      // The first read checks a given cursor against the purge too (`given.at`), after each page of the log it reads;
      // refused there, it spends nothing and hands out none of what it read.
      const first = await this.read(caller, start, this.bus.position(), options.kinds, limit, given?.at).catch(
        async (err: unknown) => {
          if (err instanceof CursorError && refund) await refund();
          throw err;
        },
      );
      // `since` is the caller's own position, handed back by a wait that must not hand the events out: it keeps its
      // cursor's date. Dated now, it would pass the EVENT_RETENTION check after events past it were purged, a silent
      // gap instead of the `expired` refusal.
      if (first.events.length > 0 || options.signal?.aborted)
        return { ...first, timedOut: false, since: this.cursors.encode(start, given?.at ?? this.now()) };
      const seconds = Math.min(MAX_WAIT_SECONDS, Math.max(0, options.timeoutSeconds));
      const signal = options.signal;
      // The timeout runs once for the whole wait: a wake that finds nothing to return waits out what is left of it.
      let ended = seconds === 0;
      const end = (): void => {
        ended = true;
        wake?.();
      };
      const timer = ended ? undefined : setTimeout(end, seconds * 1000);
      signal?.addEventListener('abort', end);
      try {
        let since: Position | undefined;
        for (;;) {
          if (!woken && !ended) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = null;
          }
          if (!woken || signal?.aborted) return { ...first, timedOut: !signal?.aborted, since: first.cursor };
          // Woken after the caller's token expired (its scheduled end not run yet): nothing logged since is read with it.
          if (this.expired(caller)) return { ...first, timedOut: false, since: first.cursor };
          // Listening on: an event delivered during the read below wakes the next turn.
          woken = false;
          since ??= this.cursors.decode(first.cursor, Infinity).position;
          const next = await this.read(caller, since, this.bus.position(), options.kinds, limit);
          // An event the cursor already covers (delivered here late, from a replica that was ahead of this one) woke it
          // with nothing to return: the wait goes on, until an event outside the cursor or the timeout.
          if (next.events.length > 0 || ended)
            return { ...next, timedOut: next.events.length === 0, since: first.cursor };
        }
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', end);
      }
    } finally {
      for (const off of unsubscribe) off();
    }
  }

  /**
   * Calls `listener` each time an event of `kind` for `key` that the caller may read (its own, or a shared one) is
   * delivered on this replica, which is every event of the deployment, since the bus crosses replicas: a
   * verification's externalId (`verification`), an identification's id (`identification`), a mobile-ID
   * authentication's authReqId (`mobile-id`), a provisioning's id (`provisioning`). Returns the unsubscribe function.
   * The caller's expiry is the transport's to check (src/server/mcp/http.ts), which ends its stream when it notices it.
   */
  onResourceChanged(caller: Caller, kind: string, key: string, listener: (event: EventRecord) => void): () => void {
    return this.bus.subscribe(kind, key, (e) => {
      if (readableBy(caller, e.scope)) listener(e);
    });
  }

  /**
   * Whether the caller's token has expired on the gateway's clock: what is logged after it is not read with it, also
   * while the transport's scheduled end at the expiry has not run (a timer firing late, a clock moved).
   */
  private expired(caller: Caller): boolean {
    return caller.expiresAt !== undefined && this.now() >= caller.expiresAt;
  }

  /**
   * The caller's events in `until` and outside `after`, oldest first, at most `limit`, and the cursor after them. With
   * `cursorAt` (`after` is a client's cursor, handed out then), refused as one before purged events where it is one.
   */
  private async read(
    caller: Caller,
    after: Position,
    until: Position,
    kinds: readonly string[],
    limit: number,
    cursorAt?: number,
  ): Promise<EventsPage> {
    const most = Math.min(MAX_LIMIT, Math.max(1, Math.floor(limit)));
    const window: ReplayWindow = { after, until, from: after.floor, cursorAt };
    const events = await replayPage(this.log, this.cursors, window, kinds, { scope: caller.scope }, most);
    const last = events[events.length - 1];
    if (events.length === most && last) return { events, cursor: last.cursor! };
    return { events, cursor: this.cursors.encode(after.union(until), this.now()) };
  }
}
