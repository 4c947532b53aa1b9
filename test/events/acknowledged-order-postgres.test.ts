import { describe, expect, it } from 'vitest';

import { EventLog, type EventRecord } from '../../src/events/index.js';
import { postgresBusFixture } from '../helpers/postgres-bus.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The order a replica delivers in (docs/decisions/061): an event acknowledged before another was received is delivered
 * before it, on every replica, whatever replica took each one and however late the notices are. The notices are
 * sent by hand here (or not at all), so that "late" is a fact of the test rather than a matter of timing.
 */
describe('a replica delivers events in the order they were acknowledged, on PostgreSQL', () => {
  const delivered: string[] = [];
  const fixture = postgresBusFixture('ack-order', 'order-test', (e) => delivered.push(e.key));
  const append = (key: string, into?: EventLog) => fixture.append(key, undefined, into);
  const notice = (seq: number) => fixture.notice(seq);

  const until = (what: string, done: () => boolean) => waitFor(done, 20_000, what);

  it('an event published here comes after one another replica acknowledged before it, whose notice has not come yet', async () => {
    delivered.length = 0;
    // Committed (acknowledged) by another replica, whose publish and notice have not happened yet.
    await append('elsewhere-first');
    const mine = await append('here-second');
    await fixture.bus.publish(mine);
    expect(delivered).toEqual(['elsewhere-first', 'here-second']);
    // Its notice, late, delivers nothing twice.
    const marker = await append('marker');
    await notice(marker.seq);
    await until('the marker', () => delivered.includes('marker'));
    expect(delivered).toEqual(['elsewhere-first', 'here-second', 'marker']);
  });

  it('an event that filled a hole and was acknowledged before a later one is delivered first, though the later one is read first', async () => {
    delivered.length = 0;
    // A number taken and not committed yet: the catch-up after `past` sees a hole there.
    let commit!: () => void;
    const committing = new Promise<void>((resolve) => (commit = resolve));
    let held: EventRecord | undefined;
    const transaction = fixture.store.db.transaction().execute(async (trx) => {
      held = await append('held', new EventLog(trx, 86_400_000, 'postgres'));
      await committing;
    });
    await until('the held insert', () => held !== undefined);
    const past = await append('past-the-hole');
    await notice(past.seq);
    await until('the event past the hole', () => delivered.includes('past-the-hole'));
    // It commits (its replica acknowledges it) and only then is the next one received; neither notice has come.
    commit();
    await transaction;
    const later = await append('after-the-commit');
    expect(later.seq).toBeGreaterThan(held!.seq);
    await notice(later.seq);
    await until('the later event', () => delivered.includes('after-the-commit'));
    expect(delivered).toEqual(['past-the-hole', 'held', 'after-the-commit']);
  });
});
