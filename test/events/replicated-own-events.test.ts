import { describe, expect, it } from 'vitest';

import { postgresBusFixture } from '../helpers/postgres-bus.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A replica remembers the events it published itself until the log brings them back, so that it does not
 * deliver them twice. What it remembers must empty again: a gateway serving notifications for weeks must not
 * keep one entry per event.
 */
describe('the events a replica published itself, on PostgreSQL', () => {
  const delivered: number[] = [];
  const fixture = postgresBusFixture('own-events', 'memory-test', (e) => delivered.push(e.seq));
  let n = 0;
  const append = () => fixture.append(`k-${++n}`);

  const until = (what: string, done: () => boolean) => waitFor(done, 20_000, what);

  it('are forgotten once their notice comes back', async () => {
    const events = [await append(), await append(), await append()];
    await Promise.all(events.map((e) => fixture.bus.publish(e)));
    expect(delivered).toEqual(expect.arrayContaining(events.map((e) => e.seq)));
    await until('the notices of the published events', () => fixture.bus.unreadOwnEvents === 0);
    expect(fixture.bus.unreadOwnEvents).toBe(0);
  });

  it('leave nothing behind when a catch-up read the event from the log before the replica published it', async () => {
    const event = await append();
    // Another replica's notice, sent between this replica's commit and its publish: its catch-up reads the event.
    await fixture.notice(event.seq + 1000);
    await until('the catch-up to deliver the event', () => delivered.includes(event.seq));
    await fixture.bus.publish(event);
    expect(fixture.bus.unreadOwnEvents).toBe(0);
  });

  it('are delivered to this replica’s subscribers once, whether a catch-up read them back before the publish or not', async () => {
    const early = await append();
    await fixture.notice(early.seq + 1000);
    await until('the catch-up to deliver the event', () => delivered.includes(early.seq));
    await fixture.bus.publish(early);
    const usual = await append();
    await fixture.bus.publish(usual);
    await until('the notices of the published events', () => fixture.bus.unreadOwnEvents === 0);
    // One more notice makes the bus read the log after both: neither is delivered again.
    await fixture.notice(usual.seq + 1000);
    const marker = await append();
    await fixture.notice(marker.seq);
    await until('the marker event read from the log', () => delivered.includes(marker.seq));
    expect(delivered.filter((s) => s === early.seq)).toHaveLength(1);
    expect(delivered.filter((s) => s === usual.seq)).toHaveLength(1);
  });
});
