import { afterEach, describe, expect, it, vi } from 'vitest';

import { EventLog, type EventRecord } from '../../src/events/index.js';
import { postgresBusFixture } from '../helpers/postgres-bus.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A hole in what a replica has delivered (a number below delivered ones whose insert has not committed: another
 * replica's webhook) is waited for a minute before a cursor counts it delivered (src/events/cursor.ts, HOLE_WAIT_MS),
 * as long as the bus looks for its event. Each hole gets its minute: one that opened while an older one was still
 * open is not given up when the older one's minute ends, or the cursors handed out meanwhile would cover an event a
 * subscriber has not received, and a resume from one of them would skip it. Only Date is faked: the database is real.
 */
describe('the holes a cursor waits for, on PostgreSQL', () => {
  const delivered: string[] = [];
  const fixture = postgresBusFixture('cursor-holes', 'hole-test', (e) => delivered.push(e.key));
  afterEach(() => void vi.useRealTimers());

  /** An append held uncommitted until `commit()`: its number is taken, its event not readable yet. */
  async function held(key: string): Promise<{ seq: number; commit(): Promise<void> }> {
    let release!: () => void;
    const releasing = new Promise<void>((resolve) => (release = resolve));
    let event: EventRecord | undefined;
    const transaction = fixture.store.db.transaction().execute(async (trx) => {
      event = await fixture.append(key, undefined, new EventLog(trx, 86_400_000, 'postgres'));
      await releasing;
    });
    await waitFor(() => event !== undefined, 20_000, `the held insert of ${key}`);
    return {
      seq: event!.seq,
      async commit() {
        release();
        await transaction;
      },
    };
  }

  /** Appends and announces an event, and waits until the bus has delivered it. */
  async function arrives(key: string): Promise<number> {
    const e = await fixture.append(key);
    await fixture.notice(e.seq);
    await waitFor(() => delivered.includes(key), 20_000, key);
    return e.seq;
  }

  it('a hole opened while an older one was open gets its own minute, not what was left of the older one', async () => {
    const t0 = Date.now();
    vi.useFakeTimers({ toFake: ['Date'], now: t0 });
    const first = await held('first-held');
    await arrives('past-the-first');
    // Half a minute on, a second hole opens above the first.
    vi.setSystemTime(t0 + 30_000);
    const second = await held('second-held');
    await arrives('past-the-second');
    // The first hole fills: only the second, a second old, is left.
    vi.setSystemTime(t0 + 31_000);
    await first.commit();
    await fixture.notice(first.seq);
    await waitFor(() => delivered.includes('first-held'), 20_000, 'first-held');
    // A minute after the first hole opened, half a minute after the second did: the second is still waited for.
    vi.setSystemTime(t0 + 61_000);
    await arrives('a-minute-on');
    expect(fixture.bus.position().has(second.seq)).toBe(false);

    await second.commit();
    await fixture.notice(second.seq);
    await waitFor(() => delivered.includes('second-held'), 20_000, 'second-held');
    expect(fixture.bus.position().has(second.seq)).toBe(true);
    expect(delivered).toEqual(['past-the-first', 'past-the-second', 'first-held', 'a-minute-on', 'second-held']);
  });
});
