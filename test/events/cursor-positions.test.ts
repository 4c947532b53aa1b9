import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { CursorCodec, CursorError, Delivered, MAX_CURSOR_RANGES, Position } from '../../src/events/cursor.js';
import type { EventLog, EventRecord } from '../../src/events/log.js';
import { replayPage } from '../../src/events/replay.js';
import { StreamCancel } from '../../src/events/stream.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const codec = CursorCodec.random();
const encodeCursor = (p: Position, at: number) => codec.encode(p, at);
const decodeCursor = (c: string, retentionMs: number, now?: number) => codec.decode(c, retentionMs, now);

/** The numbers 1..limit a position holds, as a plain set (the model the property compares with). */
function members(p: Position, limit: number): Set<number> {
  const out = new Set<number>();
  for (let n = 1; n <= limit; n++) if (p.has(n)) out.add(n);
  return out;
}

const LIMIT = 60;
const seqs = fc.array(fc.integer({ min: 1, max: LIMIT }), { maxLength: 40 });

function built(ns: number[]): Position {
  const p = new Position(0);
  for (const n of ns) p.add(n);
  return p;
}

describe('positions in the event log (cursors)', () => {
  it('add, union, upTo and covers agree with plain sets, and a cursor decodes to the position it encodes (fast-check, 300 cases each)', () => {
    fc.assert(
      fc.property(seqs, seqs, fc.integer({ min: 0, max: LIMIT }), (xs, ys, cut) => {
        const a = built(xs);
        const b = built(ys);
        expect(members(a, LIMIT)).toEqual(new Set(xs));
        expect(members(a.union(b), LIMIT)).toEqual(new Set([...xs, ...ys]));
        expect(members(a.upTo(cut), LIMIT)).toEqual(new Set(xs.filter((x) => x <= cut)));
        const subset = [...new Set(ys)].every((y) => xs.includes(y));
        expect(a.covers(b)).toBe(subset);
        // Stretches stay ascending, disjoint and apart from the floor.
        for (let i = 0; i < a.ranges.length; i += 2) {
          expect(a.ranges[i]!).toBeGreaterThan(i === 0 ? a.floor + 1 : a.ranges[i - 1]! + 1);
          expect(a.ranges[i + 1]!).toBeGreaterThanOrEqual(a.ranges[i]!);
        }
        const decoded = decodeCursor(encodeCursor(a, 1_999), Infinity, 2_000);
        expect(decoded.at).toBe(1_000);
        expect(members(decoded.position, LIMIT)).toEqual(members(a, LIMIT));
      }),
      { numRuns: 300, seed: 61 },
    );
  });

  it('a cursor is the last number when everything below it was delivered, and carries the holes otherwise', () => {
    const d = new Delivered(10, codec);
    const c11 = decodeCursor(d.record(11, 5), Infinity, 5).position;
    expect(c11).toEqual(new Position(11));
    const c13 = decodeCursor(d.record(13, 5), Infinity, 5).position;
    expect(c13).toEqual(new Position(11, [13, 13]));
    const c12 = decodeCursor(d.record(12, 5), Infinity, 5).position;
    expect(c12).toEqual(new Position(13));
  });

  it('refuses text it did not hand out, and a cursor older than the retention, naming the retention', () => {
    // Another version, a letter, a negative number, a stretch below the floor, stretches out of order, a missing floor.
    for (const bad of ['', 'not a cursor', '2_1_1', '1_1z_1', '1_1_-1', '1_1_5_3', '1_1_5_9_7', '1_1']) {
      expect(() => decodeCursor(bad, Infinity)).toThrow(CursorError);
    }
    const old = encodeCursor(new Position(3), 0);
    expect(() => decodeCursor(old, 36 * 3_600_000, 36 * 3_600_000 + 1)).toThrow(
      'older than the event retention (EVENT_RETENTION, 36 hours)',
    );
    expect(decodeCursor(old, 36 * 3_600_000, 36 * 3_600_000).position).toEqual(new Position(3));
  });

  it('a cursor altered in any character, or sealed under another gateway secret, is refused as malformed', () => {
    const cursor = encodeCursor(new Position(41, [43, 47]), 5_000);
    for (let i = 0; i < cursor.length; i++) {
      const c = cursor[i] === 'A' ? 'B' : 'A';
      const tampered = cursor.slice(0, i) + c + cursor.slice(i + 1);
      expect(() => decodeCursor(tampered, Infinity, 5_000), `character ${i}`).toThrow(
        expect.objectContaining({ reason: 'malformed' }),
      );
    }
    expect(() => CursorCodec.random().decode(cursor, Infinity, 5_000)).toThrow(
      expect.objectContaining({ reason: 'malformed' }),
    );
  });

  it('an old-format cursor (its position in clear text) is refused as malformed, not read', () => {
    for (const old of ['1_1700000000_42', '1_1700000000_42_44_46-50'])
      expect(() => decodeCursor(old, Infinity)).toThrow(expect.objectContaining({ reason: 'malformed' }));
  });

  it('a cursor reveals no sequence number: the same position reads differently under another secret, and holds no digits of it', () => {
    const cursor = encodeCursor(new Position(987654321), 5_000);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(cursor).not.toContain('987654321');
    expect(CursorCodec.random().encode(new Position(987654321), 5_000)).not.toBe(cursor);
  });

  it('a cursor with many holes is refused when longer than any the gateway hands out, and a position with more holes than a cursor carries is handed out without its highest (resend, never skip)', () => {
    const holey = new Position(0);
    for (let n = 2; n <= 4 * 4096; n += 4) holey.addRange(n, n + 1);
    const cursor = encodeCursor(holey, 5_000);
    expect(cursor.length).toBeLessThan(4096);
    const decoded = decodeCursor(cursor, Infinity, 5_000).position;
    expect(decoded.ranges.length).toBe(MAX_CURSOR_RANGES * 2);
    // Every number the cursor holds was in the position: dropping stretches can make a resume send again, not skip.
    expect(holey.covers(decoded)).toBe(true);
    const oversize = 'A'.repeat(45_000);
    expect(() => decodeCursor(oversize, Infinity)).toThrow(expect.objectContaining({ reason: 'malformed' }));
  });
});

describe('the one replay reader', () => {
  it('a replay after a cursor with the most holes a cursor carries reads each row of the log once (and at most the rest of a page again per call, which stops at its limit) and never scans the holes per row (linear)', async () => {
    const rows: EventRecord[] = [];
    for (let seq = 1; seq <= 5_000; seq++)
      rows.push({
        seq,
        kind: 'verification',
        key: `k${seq}`,
        dedupeKey: `d${seq}`,
        fingerprint: '',
        payload: {},
        meta: {},
        scope: 'app',
        receivedAt: new Date(0),
      });
    let read = 0;
    const log = {
      range: async (_kinds: readonly string[], from: number, to: number, _only: unknown, limit: number) => {
        const page = rows.filter((e) => e.seq > from && e.seq <= to).slice(0, limit);
        read += page.length;
        return page;
      },
    } as unknown as EventLog;
    // The cursor: every other number in 64 stretches spread over the log.
    const after = new Position(0);
    for (let i = 0; i < MAX_CURSOR_RANGES; i++) after.addRange(2 + i * 70, 2 + i * 70 + 30);
    const until = new Position(5_000);
    const scans = vi.spyOn(Position.prototype, 'has');
    const window = { after, until, from: after.floor };
    const got: EventRecord[] = [];
    let calls = 0;
    while (window.from < until.max()) {
      calls += 1;
      got.push(...(await replayPage(log, codec, window, ['verification'], {}, 1_000)));
    }
    scans.mockRestore();
    expect(scans).not.toHaveBeenCalled();
    expect(read).toBeLessThanOrEqual(rows.length + calls * 500);
    expect(calls).toBeLessThanOrEqual(Math.ceil(rows.length / 1_000) + 1);
    expect(got.map((e) => e.seq)).toEqual(rows.map((e) => e.seq).filter((seq) => !after.has(seq)));
  });
});

describe('a stream resumed from a cursor (the events layer, SQLite)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t.close();
  });

  it('an event published after a later one is not lost on resume from the later one’s cursor, and none is delivered twice', async () => {
    const events = t.gateway.services.events;
    const append = async (n: string) => {
      const r = await events.log.append({
        kind: 'verification',
        key: `k-${n}`,
        dedupeKey: `order-${n}`,
        payload: { n },
        scope: 'order-app',
      });
      return r.event;
    };
    const [early, late] = [await append('early'), await append('late')];
    expect(early.seq).toBeLessThan(late.seq);
    const take = async (
      after: string | undefined,
      count: number,
      publish: () => Promise<void>,
    ): Promise<EventRecord[]> => {
      const cancel = new StreamCancel();
      const stream = events.streams.subscribe(
        { kind: 'verification', scope: 'order-app', ...(after ? { after: events.position(after) } : {}) },
        cancel,
      );
      const got: EventRecord[] = [];
      const reading = (async () => {
        for await (const e of stream) {
          got.push(e);
          if (got.length === count) break;
        }
      })();
      await publish();
      await reading;
      cancel.abort();
      return got;
    };
    // The later event is published first (its webhook's 204 was written first), and the subscriber leaves after it.
    const first = await take(undefined, 1, () => events.bus.publish(late));
    expect(first.map((e) => e.seq)).toEqual([late.seq]);
    // The earlier one is published while nobody listens; resuming from the later one's cursor still gets it, once.
    await events.bus.publish(early);
    const resumed = await take(first[0]!.cursor, 1, async () => undefined);
    expect(resumed.map((e) => e.seq)).toEqual([early.seq]);
    // And from that cursor, nothing of the two again: the next event is the next one.
    const next = await append('next');
    const after = await take(resumed[0]!.cursor, 1, () => events.bus.publish(next));
    expect(after.map((e) => e.seq)).toEqual([next.seq]);
  });
});
