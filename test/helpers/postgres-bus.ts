import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll } from 'vitest';

import { CursorCodec } from '../../src/events/cursor.js';
import { EventLog, type EventRecord } from '../../src/events/index.js';
import { PostgresBus } from '../../src/events/postgres-bus.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';
import { startPostgres, type TestPostgres } from './postgres.js';

/** One replica's event log and PostgreSQL bus over an embedded PostgreSQL, without a gateway around them. */
export interface BusFixture {
  readonly store: Store;
  readonly log: EventLog;
  readonly bus: PostgresBus;
  /** The database's URL, for another replica's bus on it. */
  readonly databaseUrl: string;
  /** Appends an event of the fixture's kind (created, or the test fails), into `into` (a transaction's log) if given. */
  append(key: string, payload?: Record<string, unknown>, into?: EventLog): Promise<EventRecord>;
  /** Sends the notice another replica would send for `seq`, by hand: "late" is then a fact of the test. */
  notice(seq: number): Promise<void>;
}

/**
 * Starts the fixture before the describe block's tests (a database of `name`, a bus subscribed to every event of
 * `kind`, each delivery handed to `delivered`) and stops it after them.
 */
export function postgresBusFixture(name: string, kind: string, delivered: (event: EventRecord) => void): BusFixture {
  let pg: TestPostgres;
  let dir: string;
  let n = 0;
  const f = {} as { store: Store; log: EventLog; bus: PostgresBus; databaseUrl: string };
  beforeAll(async () => {
    pg = await startPostgres();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
    const logger = createLogger({ level: 'silent' });
    const databaseUrl = await pg.createDatabase(name.replace(/-/g, '_'));
    f.databaseUrl = databaseUrl;
    f.store = await openStore({ dataDir: dir, databaseUrl, logger });
    f.log = new EventLog(f.store.db, 86_400_000, f.store.dialect);
    f.bus = await PostgresBus.start({ databaseUrl, db: f.store.db, log: f.log, logger, cursors: CursorCodec.random() });
    f.bus.subscribe(kind, null, delivered);
  }, 120_000);
  afterAll(async () => {
    await f.bus?.close();
    await f.store?.close();
    await pg?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    get store() {
      return f.store;
    },
    get log() {
      return f.log;
    },
    get bus() {
      return f.bus;
    },
    get databaseUrl() {
      return f.databaseUrl;
    },
    async append(key, payload, into = f.log) {
      n += 1;
      const result = await into.append({ kind, key, dedupeKey: `${name}-${n}`, payload: payload ?? { n } });
      if (result.status !== 'created') throw new Error(`append: ${result.status}`);
      return result.event;
    },
    async notice(seq) {
      await sql`select pg_notify('gateway_events', ${JSON.stringify({ seq })})`.execute(f.store.db);
    },
  };
}
