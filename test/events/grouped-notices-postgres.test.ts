import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CursorCodec } from '../../src/events/cursor.js';
import { EventLog, type EventRecord } from '../../src/events/index.js';
import { PostgresBus } from '../../src/events/postgres-bus.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';
import type { Database } from '../../src/store/schema.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const KIND = 'grouped-notices';
const EVENTS = 20;

/**
 * A replica that publishes events while its NOTIFY is in flight sends their notices together, in one statement
 * (EVENT_NOTIFY_GROUPED, docs/decisions/083). On or off, every event still has its own notice, and the other replica
 * delivers every event once, in sequence order.
 */
describe('grouped NOTIFYs across replicas on PostgreSQL', () => {
  let server: TestPostgres;
  let dir: string;
  let url: string;
  const stores: Store[] = [];
  const buses: PostgresBus[] = [];
  let receiver: PostgresBus;
  let listener: pg.Client;
  const delivered: number[] = [];
  const notices: number[] = [];
  const logger = createLogger({ level: 'silent' });
  let n = 0;

  const replica = async (name: string, groupNotices: boolean, statements?: { count: number }) => {
    const store = await openStore({ dataDir: path.join(dir, name), databaseUrl: url, logger });
    stores.push(store);
    const log = new EventLog(store.db, 86_400_000, store.dialect);
    // The bus sends nothing but its NOTIFYs through `db`: each statement it runs is counted.
    const db: Kysely<Database> = statements
      ? store.db.withPlugin({
          transformQuery: (args) => (statements.count++, args.node),
          transformResult: (args) => Promise.resolve(args.result),
        })
      : store.db;
    const bus = await PostgresBus.start({
      databaseUrl: url,
      db,
      log,
      logger,
      cursors: CursorCodec.random(),
      groupNotices,
    });
    buses.push(bus);
    return { log, bus };
  };

  beforeAll(async () => {
    server = await startPostgres();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grouped-notices-'));
    url = await server.createDatabase('grouped_notices');
    ({ bus: receiver } = await replica('receiver', true));
    receiver.subscribe(KIND, null, (e) => delivered.push(e.seq));
    listener = new pg.Client({ connectionString: url });
    await listener.connect();
    listener.on('notification', (msg) => notices.push((JSON.parse(msg.payload!) as { seq: number }).seq));
    await listener.query('LISTEN gateway_events');
  }, 120_000);

  afterAll(async () => {
    await listener?.end();
    for (const bus of buses) await bus.close();
    for (const store of stores) await store.close();
    await server?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const publishAll = async (groupNotices: boolean) => {
    const statements = { count: 0 };
    const { log, bus } = await replica(`publisher-${String(groupNotices)}`, groupNotices, statements);
    const events: EventRecord[] = [];
    for (let i = 0; i < EVENTS; i++) {
      n += 1;
      const result = await log.append({ kind: KIND, key: `k-${n}`, dedupeKey: `grouped-${n}`, payload: { n } });
      events.push(result.event);
    }
    const seqs = events.map((e) => e.seq);
    await Promise.all(events.map((e) => bus.publish(e)));
    await waitFor(() => seqs.every((s) => delivered.includes(s)), 20_000, 'the other replica to deliver every event');
    await waitFor(() => seqs.every((s) => notices.includes(s)), 20_000, 'a notice for every event');
    return { seqs, statements: statements.count };
  };

  it('one statement per event when off, fewer when on; each event its own notice, delivered once and in order', async () => {
    const off = await publishAll(false);
    expect(off.statements).toBe(EVENTS);
    const on = await publishAll(true);
    expect(on.statements).toBeGreaterThanOrEqual(1);
    expect(on.statements).toBeLessThan(EVENTS);
    for (const { seqs } of [off, on]) {
      expect(notices.filter((s) => seqs.includes(s))).toHaveLength(EVENTS);
      expect(new Set(notices.filter((s) => seqs.includes(s)))).toEqual(new Set(seqs));
    }
    // Every event once, in sequence order, on the other replica, whichever way its notice came.
    expect(delivered).toEqual([...off.seqs, ...on.seqs]);
  });
});
