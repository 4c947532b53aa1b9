import { randomBytes, timingSafeEqual, type Cipher } from 'node:crypto';

import { aesCtr, blockCipher, HmacSha256, SHA256_BLOCK } from '../secret.js';

/**
 * Cursors: positions in the durable event log that a subscriber resumes from (docs/decisions/061).
 *
 * A position is a set of sequence numbers: every number up to `floor`, and a few stretches above it. It is a set
 * rather than one number because numbers are not always delivered in order: on PostgreSQL a `bigserial` number is
 * taken at insert and an insert can commit after a later one, and every replica delivers an event once it committed
 * and was published (src/events/postgres-bus.ts); with SQLite two webhooks publish in the order their responses are
 * written. A subscriber resuming from a position is sent every event outside it, so an event with a lower number
 * that arrived after the cursor was handed out is not lost. Normally the stretches are empty and the cursor is the
 * number of the last event delivered.
 */
export class Position {
  constructor(
    /** Every number up to this one is in the set. */
    public floor: number,
    /** Stretches above the floor, `[from, to, from, to, …]`, ascending, disjoint, not touching each other or the floor. */
    public ranges: number[] = [],
  ) {}

  copy(): Position {
    return new Position(this.floor, this.ranges.slice());
  }

  has(seq: number): boolean {
    if (seq <= this.floor) return true;
    const r = this.ranges;
    for (let i = 0; i < r.length; i += 2) {
      if (seq < r[i]!) return false;
      if (seq <= r[i + 1]!) return true;
    }
    return false;
  }

  /** The highest number in the set. */
  max(): number {
    return this.ranges.length ? this.ranges[this.ranges.length - 1]! : this.floor;
  }

  /** Adds `seq` (in place). */
  add(seq: number): void {
    if (seq === this.floor + 1 && this.ranges.length === 0) {
      this.floor = seq;
      return;
    }
    this.addRange(seq, seq);
  }

  /** Adds every number from `from` to `to` (in place). */
  addRange(from: number, to: number): void {
    if (to <= this.floor) return;
    if (from <= this.floor + 1) {
      this.floor = to;
    } else {
      const r = this.ranges;
      let i = 0;
      while (i < r.length && r[i + 1]! < from - 1) i += 2;
      let j = i;
      let lo = from;
      let hi = to;
      while (j < r.length && r[j]! <= to + 1) {
        lo = Math.min(lo, r[j]!);
        hi = Math.max(hi, r[j + 1]!);
        j += 2;
      }
      r.splice(i, j - i, lo, hi);
    }
    this.normalize();
  }

  /** Stretches that now touch the floor join it. */
  private normalize(): void {
    const r = this.ranges;
    let k = 0;
    while (k < r.length && r[k]! <= this.floor + 1) {
      this.floor = Math.max(this.floor, r[k + 1]!);
      k += 2;
    }
    if (k > 0) r.splice(0, k);
  }

  /** The union of this set and `other` (a new position). */
  union(other: Position): Position {
    const out = new Position(Math.max(this.floor, other.floor));
    for (const p of [this, other])
      for (let i = 0; i < p.ranges.length; i += 2) out.addRange(p.ranges[i]!, p.ranges[i + 1]!);
    return out;
  }

  /** The numbers of this set up to `seq` (a new position). */
  upTo(seq: number): Position {
    if (seq <= this.floor) return new Position(seq);
    const out = new Position(this.floor);
    for (let i = 0; i < this.ranges.length && this.ranges[i]! <= seq; i += 2)
      out.ranges.push(this.ranges[i]!, Math.min(seq, this.ranges[i + 1]!));
    return out;
  }

  /** The stretches of numbers below `seq` that are not in this set, ascending, each `[from, to]`. */
  holesBelow(seq: number): [number, number][] {
    const out: [number, number][] = [];
    let from = this.floor + 1;
    const r = this.ranges;
    for (let i = 0; i < r.length && from < seq; i += 2) {
      out.push([from, Math.min(r[i]! - 1, seq - 1)]);
      from = r[i + 1]! + 1;
    }
    if (from < seq) out.push([from, seq - 1]);
    return out;
  }

  /** Whether every number of `other` is in this set. */
  covers(other: Position): boolean {
    if (other.floor > this.floor) return false;
    const r = other.ranges;
    for (let i = 0; i < r.length; i += 2) {
      // A stretch is covered when both of its ends lie in one stretch (or below the floor) of this set.
      if (r[i + 1]! <= this.floor) continue;
      let inside = false;
      for (let j = 0; j < this.ranges.length; j += 2) {
        if (this.ranges[j]! <= r[i]! && r[i + 1]! <= this.ranges[j + 1]!) {
          inside = true;
          break;
        }
      }
      if (!inside) return false;
    }
    return true;
  }
}

const VERSION = '2';

/**
 * The most stretches a cursor carries. A position with more (a bus that waits on many holes at once) is handed out
 * without its highest stretches: a resume from it may send those events again, never skip one. A cursor naming more
 * is refused, so a replay after any cursor costs a bounded amount per event.
 */
export const MAX_CURSOR_RANGES = 64;
/** The longest cursor text accepted; longer is refused before any work. */
const MAX_CURSOR_CHARS = 4096;
const TAG_BYTES = 16;

/** A cursor that is not one this gateway hands out, or one older than the event retention. */
export class CursorError extends Error {
  constructor(
    message: string,
    readonly reason: 'malformed' | 'expired',
  ) {
    super(message);
    this.name = 'CursorError';
  }
}

const NUMBER = /^[0-9]{1,16}$/;

function malformed(): CursorError {
  return new CursorError('not a cursor this gateway handed out', 'malformed');
}

function decimal(text: string): number {
  if (!NUMBER.test(text)) throw malformed();
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw malformed();
  return n;
}

/**
 * Cursors as the gateway hands them out (docs/decisions/067): opaque and tamper-proof. The position and the time
 * are written as `2_<at in s>_<floor>[_<from>[-<to>]]…`, then sealed deterministically under keys derived from the
 * gateway secret: an HMAC-SHA256 of the text (its first 16 bytes) is both the tag and the AES-256-CTR IV that hides
 * the text (a synthetic-IV construction). The same position gives the same cursor, nothing in it is readable (not
 * the deployment's event count), and a cursor the gateway did not make is refused before anything is read.
 */
export class CursorCodec {
  /** The cursor's HMAC (its tag and its IV), under the MAC key. */
  private readonly mac: HmacSha256;
  /**
   * AES-256 on single blocks (ECB, no padding), kept for the codec's life: the CTR keystream is these blocks' cipher of
   * the counter blocks, as `aes-256-ctr` makes it, without a cipher object made per cursor (half the cost of a seal).
   */
  private readonly blocks: Cipher;

  constructor(macKey: Buffer, encKey: Buffer) {
    if (macKey.length !== 32 || encKey.length !== 32) throw new Error('cursor keys must be 32 bytes');
    this.mac = new HmacSha256(macKey);
    this.blocks = blockCipher(encKey);
  }

  /** A codec under fresh random keys: for a bus or reader built alone (tests); a gateway uses its secret's. */
  static random(): CursorCodec {
    return new CursorCodec(randomBytes(32), randomBytes(32));
  }

  /** The cursor of `position`, handed out with an event received at `at` (epoch ms). */
  encode(position: Position, at: number): string {
    let text = `${VERSION}_${Math.floor(at / 1000)}_${position.floor}`;
    const r = position.ranges;
    const n = Math.min(r.length, MAX_CURSOR_RANGES * 2);
    for (let i = 0; i < n; i += 2) text += r[i] === r[i + 1] ? `_${r[i]}` : `_${r[i]}-${r[i + 1]}`;
    // The text is written once, in place after the HMAC's inner pad.
    const inner = this.mac.inner(text.length);
    inner.write(text, SHA256_BLOCK, 'latin1');
    const plain = inner.subarray(SHA256_BLOCK);
    const tag = this.mac.of(inner).subarray(0, TAG_BYTES);
    return Buffer.concat([tag, aesCtr(this.blocks, tag, plain)]).toString('base64url');
  }

  /**
   * The position a cursor names, and when it was handed out. Throws CursorError: `malformed` for anything this
   * gateway did not hand out (altered, forged, of an older format, too long), `expired` when it is older than the
   * retention (events after it may have been deleted, and a resume must never skip silently).
   */
  decode(cursor: string, retentionMs: number, now = Date.now()): { position: Position; at: number } {
    if (cursor.length <= TAG_BYTES || cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor))
      throw malformed();
    const bytes = Buffer.from(cursor, 'base64url');
    // One text per cursor: a last character whose spare bits differ decodes to the same bytes, and is refused.
    if (bytes.length <= TAG_BYTES || bytes.toString('base64url') !== cursor) throw malformed();
    const tag = bytes.subarray(0, TAG_BYTES);
    const inner = this.mac.inner(bytes.length - TAG_BYTES);
    const plain = aesCtr(this.blocks, tag, bytes.subarray(TAG_BYTES));
    plain.copy(inner, SHA256_BLOCK);
    const expected = this.mac.of(inner).subarray(0, TAG_BYTES);
    if (!timingSafeEqual(tag, expected)) throw malformed();
    const parts = plain.toString('latin1').split('_');
    if (parts[0] !== VERSION || parts.length < 3 || parts.length - 3 > MAX_CURSOR_RANGES) throw malformed();
    const at = decimal(parts[1]!) * 1000;
    const position = new Position(decimal(parts[2]!));
    let last = position.floor + 1;
    for (const part of parts.slice(3)) {
      const dash = part.indexOf('-');
      const from = decimal(dash === -1 ? part : part.slice(0, dash));
      const to = dash === -1 ? from : decimal(part.slice(dash + 1));
      if (from <= last || to < from) throw malformed();
      position.ranges.push(from, to);
      last = to + 1;
    }
    if (now - at > retentionMs) {
      throw new CursorError(
        `the cursor is from ${new Date(at).toISOString()}, older than the event retention (EVENT_RETENTION, ${retentionWords(retentionMs)}): events after it may have been deleted; start again without a cursor and read the current state`,
        'expired',
      );
    }
    return { position, at };
  }
}

/**
 * The refusal of a cursor that lies before events the retention purge has deleted (`EventLog.purgedThrough`), however
 * young it is: an event is kept for the EVENT_RETENTION in force where and when it was stored, so a cursor dated
 * within today's retention may still precede events purged under a shorter one. Refused as an old cursor is.
 */
export function purgedPast(at: number, retentionMs: number): CursorError {
  return new CursorError(
    `the cursor is from ${new Date(at).toISOString()}, before events the retention purge has deleted (EVENT_RETENTION, ${retentionWords(retentionMs)} now; each event is kept for the retention in force when it was stored): events after it may have been deleted; start again without a cursor and read the current state`,
    'expired',
  );
}

/** Human words for a retention in ms: `7 days`, `36 hours`, `90 minutes`, `45 seconds`. */
export function retentionWords(ms: number): string {
  const units: [number, string][] = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
    [1000, 'second'],
  ];
  for (const [size, name] of units)
    if (ms >= size && ms % size === 0) return `${ms / size} ${name}${ms === size ? '' : 's'}`;
  return `${ms} ms`;
}

/**
 * How long a hole below delivered numbers is waited for before it counts as delivered (a number that never
 * appears: a rolled-back insert; an event whose publish never came). As long as the PostgreSQL bus looks for a
 * missing number (src/events/postgres-bus.ts).
 */
const HOLE_WAIT_MS = 60_000;
/** At most this many stretches are kept above the floor; past it the oldest hole is given up. */
const MAX_RANGES = 1000;

/**
 * What one replica's bus has delivered, as a position, and the cursor of each event it delivers: computed once per
 * event when it is published (never per subscriber), without reading the log.
 */
export class Delivered {
  private readonly position: Position;
  /** Since when the lowest hole above the floor has been the lowest (0: no hole): its minute counts from then. */
  private holeSince = 0;

  constructor(
    floor: number,
    private readonly cursors: CursorCodec,
  ) {
    this.position = new Position(floor);
  }

  /**
   * Counts `seq` delivered; returns its cursor (at: when the event was received) when `wanted` (someone on this
   * replica listens for the event: sealing one costs an HMAC and an AES pass, which an event nobody waits for here
   * need not pay).
   */
  record(seq: number, at: number, wanted?: true): string;
  record(seq: number, at: number, wanted: boolean): string | undefined;
  record(seq: number, at: number, wanted = true): string | undefined {
    const p = this.position;
    const floor = p.floor;
    p.add(seq);
    if (p.ranges.length === 0) {
      this.holeSince = 0;
    } else {
      const now = Date.now();
      // The lowest hole filled and another is the lowest now: its wait starts here (it may have opened a moment ago),
      // not when the one that filled did, whose minute would give it up early.
      if (this.holeSince === 0 || p.floor > floor) this.holeSince = now;
      else if (now - this.holeSince >= HOLE_WAIT_MS || p.ranges.length > MAX_RANGES * 2) {
        p.addRange(p.floor + 1, p.ranges[0]! - 1);
        this.holeSince = p.ranges.length ? now : 0;
      }
    }
    return wanted ? this.cursors.encode(p, at) : undefined;
  }

  /** Every number up to this one is delivered (or given up). */
  floor(): number {
    return this.position.floor;
  }

  /** The numbers below `seq` not delivered (nor given up), as stretches. */
  holesBelow(seq: number): [number, number][] {
    return this.position.holesBelow(seq);
  }

  /** A copy of the position now. */
  snapshot(): Position {
    return this.position.copy();
  }
}
