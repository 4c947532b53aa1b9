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
   * When the client's cursor that `after` came from was handed out, until the purge's watermark is checked: the next
   * read checks it (`checkPurge`) and clears it. Absent: `after` is no client's cursor, or was checked already.
   */
  cursorAt?: number;
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
 * (MAX_CURSOR_RANGES) and walked once per page. With `window.cursorAt`, the first read checks the client's cursor
 * against the retention purge (`checkPurge`), even when there is nothing to read: CursorError `expired` when refused.
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
    const rows = await log.range(kinds, window.from, to, only, page);
    if (window.cursorAt !== undefined) await checkPurge(log, window);
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
  if (window.cursorAt !== undefined) await checkPurge(log, window);
  return events;
}

/**
 * Throws CursorError `expired` when the retention purge has deleted an event numbered above the window's floor
 * (`EventLog.purgedThrough`), whatever the cursor's date: a resume must never skip in silence. One read of one row,
 * once per resume, never per event. Read after the replay's first page, not before it: the purge raises the watermark
 * before it deletes, so a watermark still at or below the floor means that page lost nothing.
 */
async function checkPurge(log: EventLog, window: ReplayWindow): Promise<void> {
  if ((await log.purgedThrough()) > window.after.floor) throw purgedPast(window.cursorAt!, log.retentionMs);
  window.cursorAt = undefined;
}
