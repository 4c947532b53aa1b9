import type { Caller } from '../auth/caller.js';
import { purgedPast, type CursorCodec, type Position } from './cursor.js';
import type { EventLog, EventRecord } from './log.js';

/** Events read from the log per query. */
const PAGE = 500;

/** What a replay sends: the events in `until` and outside `after`, from the log after `from` (moved on as pages are read). */
export interface ReplayWindow {
  after: Position;
  until: Position;
  from: number;
  /**
   * When the client's cursor that `after` came from was handed out: every read of the replay then checks the purge's
   * watermark (`checkPurge`). Absent: `after` is no client's cursor, and nothing is checked.
   */
  cursorAt?: number;
  /**
   * Whether a read has checked the watermark yet: until one has, a replay with nothing to read checks it all the same
   * (`replayPage`), and a stream keeps asking for a page (src/events/stream.ts).
   */
  checked?: boolean;
}

/** Membership of ascending numbers in a position, in one pass over its stretches (not a scan per number). */
class Ascending {
  private i = 0;
  constructor(private readonly p: Position) {}

  has(seq: number): boolean {
    if (seq <= this.p.floor) return true;
    const r = this.p.ranges;
    while (this.i < r.length && r[this.i + 1]! < seq) this.i += 2;
    return this.i < r.length && r[this.i]! <= seq;
  }
}

/**
 * The one replay reader (streams resumed with `after` or Last-Event-ID, MCP's wait_for_events and resources): up to
 * `most` events of `window`, oldest first, each with its cursor (every number up to it that the bus had delivered is
 * either sent or not the reader's), reading the log in pages. `window.from` moves past what was read; it reaches
 * `window.until.max()` when the replay is over. Linear in the rows read: a cursor's stretches are bounded
 * (MAX_CURSOR_RANGES) and walked once per page. With `window.cursorAt`, each read checks the client's cursor against
 * the retention purge (`checkPurge`), and the first check is made even when there is nothing to read: CursorError
 * `expired` when refused, and the events this call gathered before are not returned.
 */
export async function replayPage(
  log: EventLog,
  cursors: CursorCodec,
  window: ReplayWindow,
  kinds: readonly string[],
  only: { key?: string; scope?: string; reader?: Caller },
  most: number,
  keep: (e: EventRecord) => boolean = () => true,
): Promise<EventRecord[]> {
  const events: EventRecord[] = [];
  const to = window.until.max();
  while (window.from < to && events.length < most) {
    const page = Math.min(PAGE, Math.max(most - events.length, 50));
    const start = window.from;
    const rows = await log.range(kinds, start, to, only, page);
    if (window.cursorAt !== undefined) await checkPurge(log, window, start);
    const inUntil = new Ascending(window.until);
    const inAfter = new Ascending(window.after);
    for (const e of rows) {
      window.from = e.seq;
      if (!inUntil.has(e.seq) || inAfter.has(e.seq) || !keep(e)) continue;
      e.cursor = cursors.encode(window.after.union(window.until.upTo(e.seq)), e.receivedAt.getTime());
      events.push(e);
      if (events.length === most) return events;
    }
    if (rows.length < page) window.from = to;
  }
  // Nothing to read (the cursor is at or past what this replica has delivered): checked all the same.
  if (window.cursorAt !== undefined && window.checked !== true) await checkPurge(log, window, window.from);
  return events;
}

/**
 * Throws CursorError `expired` when the retention purge has deleted an event numbered above `from`, where the read just
 * made started (`EventLog.purgedThrough`), whatever the cursor's date: a resume must never skip in silence. What lies
 * at or below `from` was read already (on the first read, `from` is the cursor's floor). One read of one row per read
 * of a resumed replay, never per event. Read after the page, not before it: the purge raises the watermark before it
 * deletes, so a watermark still at or below `from` means that page lost nothing. Checked on every page, not the first
 * alone: a purge that runs between two pages (a replica with a shorter EVENT_RETENTION, a retention changed) may
 * delete events after the first page that the next one would have read.
 */
async function checkPurge(log: EventLog, window: ReplayWindow, from: number): Promise<void> {
  if ((await log.purgedThrough()) > from) throw purgedPast(window.cursorAt!, log.retentionMs);
  window.checked = true;
}
