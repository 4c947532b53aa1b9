import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { EventLog, type EventRecord } from '../../src/events/index.js';
import { PostgresBus } from '../../src/events/postgres-bus.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The order a replica delivers in (docs/decisions/061): an event acknowledged before another was received is delivered
 * before it, on every replica, whatever replica took each one and however late the notices are. The notices are
 * sent by hand here (or not at all), so that "late" is a fact of the test rather than a matter of timing.
 */
describe('a replica delivers events in the order they were acknowledged, on PostgreSQL', () => {
  let pg: TestPostgres;
  let dir: string;
  let store: Store;
  let log: EventLog;
  let bus: PostgresBus;
  const delivered: string[] = [];
  let n = 0;

  beforeAll(async () => {
    pg = await startPostgres();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ack-order-'));
    const logger = createLogger({ level: 'silent' });
    const databaseUrl = await pg.createDatabase('ack_order');
    store = await openStore({ dataDir: dir, databaseUrl, logger });
    log = new EventLog(store.db, 86_400_000, store.dialect);
    bus = await PostgresBus.start({ databaseUrl, db: store.db, log, logger });
    bus.subscribe('order-test', null, (e) => delivered.push(e.key));
  }, 120_000);
  afterAll(async () => {
    await bus?.close();
    await store?.close();
    await pg?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function append(key: string, into: EventLog = log): Promise<EventRecord> {
    n += 1;
    const result = await into.append({ kind: 'order-test', key, dedupeKey: `order-${n}`, payload: { n } });
    if (result.status !== 'created') throw new Error(`append: ${result.status}`);
    return result.event;
  }

  /** Another replica's notice for `seq`. */
  async function notice(seq: number): Promise<void> {
    await sql`select pg_notify('gateway_events', ${JSON.stringify({ seq })})`.execute(store.db);
  }

  const until = (what: string, done: () => boolean) => waitFor(done, 20_000, what);

  it('an event published here comes after one another replica acknowledged before it, whose notice has not come yet', async () => {
    delivered.length = 0;
    // Committed (acknowledged) by another replica, whose publish and notice have not happened yet.
    await append('elsewhere-first');
    const mine = await append('here-second');
    await bus.publish(mine);
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
    const transaction = store.db.transaction().execute(async (trx) => {
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
