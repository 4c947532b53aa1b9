import { sql } from 'kysely';
import { describe, expect, it, vi } from 'vitest';

import type { EventRecord } from '../../src/events/index.js';
import { postgresBusFixture } from '../helpers/postgres-bus.js';
import { waitFor } from '../helpers/wait.js';

const KIND = 'catch-up-read-fails';

/**
 * A catch-up reads the events after the highest number it read, then looks again for the numbers missing below them.
 * When the database fails between those two reads (it went away, the connection was cut), the events of the first
 * read were not delivered: the next pass must read them again, not start after them.
 */
describe('a catch-up whose second read fails on PostgreSQL', () => {
  const delivered: number[] = [];
  const f = postgresBusFixture('catch-up-read-fails', KIND, (event: EventRecord) => delivered.push(event.seq));

  it('delivers the events of the first read once the database answers again, once each and in order', async () => {
    // A number no row will ever hold, as a rolled-back insert leaves: the catch-up looks for it again.
    await sql`select nextval(pg_get_serial_sequence('events', 'seq'))`.execute(f.store.db);
    const first = await f.append('k-1');
    const fails = vi.spyOn(f.log, 'inStretches').mockRejectedValueOnce(new Error('Connection terminated unexpectedly'));
    try {
      await f.notice(first.seq);
      await waitFor(() => fails.mock.calls.length > 0, 10_000, 'the failed look for the missing number');
      // Another replica's next event: its notice starts the next pass.
      const second = await f.append('k-2');
      await f.notice(second.seq);
      await waitFor(() => delivered.includes(second.seq), 10_000, 'the second event');
      expect(delivered).toEqual([first.seq, second.seq]);
    } finally {
      fails.mockRestore();
    }
  });
});
