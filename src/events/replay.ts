import type { Caller } from '../auth/caller.js';
import type { CursorCodec, Position } from './cursor.js';
import type { EventLog, EventRecord } from './log.js';

/** Events read from the log per query. */
const PAGE = 500;

/** What a replay sends: the events in `until` and outside `after`, from the log after `from` (moved on as pages are read). */
export interface ReplayWindow {
  after: Position;
  until: Position;
  from: number;
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
 * (MAX_CURSOR_RANGES) and walked once per page.
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
  return events;
}
