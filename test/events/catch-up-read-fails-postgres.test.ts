import { sql } from 'kysely';
import { describe, expect, it, vi } from 'vitest';

import { CursorCodec } from '../../src/events/cursor.js';
import { EventLog, type EventRecord } from '../../src/events/index.js';
import { PostgresBus } from '../../src/events/postgres-bus.js';
import { createLogger } from '../../src/logger.js';
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
      await waitFor(() => fails.mock.calls.length > 0, 20_000, 'the failed look for the missing number');
      // Another replica's next event: its notice starts the next pass.
      const second = await f.append('k-2');
      await f.notice(second.seq);
      await waitFor(() => delivered.includes(second.seq), 20_000, 'the second event');
      expect(delivered).toEqual([first.seq, second.seq]);
    } finally {
      fails.mockRestore();
    }
  });
});

/**
 * A replica that starts while another replica's insert holds a number below the log's highest: once that insert
 * commits, its event reaches the subscribers of the new replica, before the events that come after it.
 */
describe('a replica started while a lower number is still being inserted, on PostgreSQL', () => {
  const f = postgresBusFixture('started-past-a-hole', 'started-past-a-hole', () => undefined);

  it('delivers the held event once it commits, then the later ones', async () => {
    await f.append('before');
    let commit!: () => void;
    const committing = new Promise<void>((resolve) => (commit = resolve));
    let held: EventRecord | undefined;
    const transaction = f.store.db.transaction().execute(async (trx) => {
      held = await f.append('held', undefined, new EventLog(trx, 86_400_000, 'postgres'));
      await committing;
    });
    await waitFor(() => held !== undefined, 20_000, 'the held insert');
    const past = await f.append('past-the-hole');
    expect(past.seq).toBeGreaterThan(held!.seq);
    const started = await PostgresBus.start({
      databaseUrl: f.databaseUrl,
      db: f.store.db,
      log: f.log,
      logger: createLogger({ level: 'silent' }),
      cursors: CursorCodec.random(),
    });
    try {
      const delivered: string[] = [];
      started.subscribe('started-past-a-hole', null, (e) => delivered.push(e.key));
      commit();
      await transaction;
      await f.notice(held!.seq);
      const later = await f.append('later');
      await f.notice(later.seq);
      await waitFor(() => delivered.includes('later'), 20_000, 'the later event');
      expect(delivered).toEqual(['held', 'later']);
    } finally {
      await started.close();
    }
  });
});
