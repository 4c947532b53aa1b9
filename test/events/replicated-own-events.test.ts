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
 * A replica remembers the events it published itself until the log brings them back, so that it does not
 * deliver them twice. What it remembers must empty again: a gateway serving notifications for weeks must not
 * keep one entry per event.
 */
describe('the events a replica published itself, on PostgreSQL', () => {
  let pg: TestPostgres;
  let dir: string;
  let store: Store;
  let log: EventLog;
  let bus: PostgresBus;
  const delivered: number[] = [];
  let n = 0;

  beforeAll(async () => {
    pg = await startPostgres();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'own-events-'));
    const logger = createLogger({ level: 'silent' });
    const databaseUrl = await pg.createDatabase('own_events');
    store = await openStore({ dataDir: dir, databaseUrl, logger });
    log = new EventLog(store.db, 86_400_000, store.dialect);
    bus = await PostgresBus.start({ databaseUrl, db: store.db, log, logger });
    bus.subscribe('memory-test', null, (e) => delivered.push(e.seq));
  }, 120_000);
  afterAll(async () => {
    await bus?.close();
    await store?.close();
    await pg?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function append(): Promise<EventRecord> {
    n += 1;
    const result = await log.append({ kind: 'memory-test', key: `k-${n}`, dedupeKey: `d-${n}`, payload: { n } });
    if (result.status !== 'created') throw new Error(`append: ${result.status}`);
    return result.event;
  }

  const until = (what: string, done: () => boolean) => waitFor(done, 20_000, what);

  it('are forgotten once their notice comes back', async () => {
    const events = [await append(), await append(), await append()];
    await Promise.all(events.map((e) => bus.publish(e)));
    expect(delivered).toEqual(expect.arrayContaining(events.map((e) => e.seq)));
    await until('the notices of the published events', () => bus.unreadOwnEvents === 0);
    expect(bus.unreadOwnEvents).toBe(0);
  });

  it('leave nothing behind when a catch-up read the event from the log before the replica published it', async () => {
    const event = await append();
    // Another replica's notice, sent between this replica's commit and its publish: its catch-up reads the event.
    await sql`select pg_notify('gateway_events', ${JSON.stringify({ seq: event.seq + 1000 })})`.execute(store.db);
    await until('the catch-up to deliver the event', () => delivered.includes(event.seq));
    await bus.publish(event);
    expect(bus.unreadOwnEvents).toBe(0);
  });

  it('are delivered to this replica’s subscribers once, whether a catch-up read them back before the publish or not', async () => {
    const early = await append();
    await sql`select pg_notify('gateway_events', ${JSON.stringify({ seq: early.seq + 1000 })})`.execute(store.db);
    await until('the catch-up to deliver the event', () => delivered.includes(early.seq));
    await bus.publish(early);
    const usual = await append();
    await bus.publish(usual);
    await until('the notices of the published events', () => bus.unreadOwnEvents === 0);
    // One more notice makes the bus read the log after both: neither is delivered again.
    await sql`select pg_notify('gateway_events', ${JSON.stringify({ seq: usual.seq + 1000 })})`.execute(store.db);
    const marker = await append();
    await sql`select pg_notify('gateway_events', ${JSON.stringify({ seq: marker.seq })})`.execute(store.db);
    await until('the marker event read from the log', () => delivered.includes(marker.seq));
    expect(delivered.filter((s) => s === early.seq)).toHaveLength(1);
    expect(delivered.filter((s) => s === usual.seq)).toHaveLength(1);
  });
});
