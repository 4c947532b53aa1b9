// Migration 016 adds the retention purge's watermark (the highest sequence number it has deleted, which a resume from
// a cursor reads: src/events/replay.ts). What purges before it deleted is not recorded anywhere; what they left
// is: on each dialect the watermark starts below the oldest stored event, or, with none stored, at the highest number
// the log has given out. A purge then raises it to the highest number it deletes, and never lowers it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { EventLog } from '../../src/events/index.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Dialect, type Store } from '../../src/store/index.js';
import { migrationProvider } from '../../src/store/migrations.js';
import { GroupCommitSqliteDialect } from '../../src/store/sqlite-dialect.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const BEFORE = '015_key_app_names';
const NOW = Date.now();
const HOUR_MS = 3_600_000;

/** Migrates to 015, appends `count` events, then deletes those numbered up to `deleteThrough` (a purge before 016). */
async function fillBefore016(db: Kysely<any>, dialect: Dialect, count: number, deleteThrough: number): Promise<void> {
  const migrated = await new Migrator({ db, provider: migrationProvider(dialect) }).migrateTo(BEFORE);
  if (migrated.error) throw migrated.error;
  for (let i = 1; i <= count; i++) {
    await db
      .insertInto('events')
      .values({
        kind: 'provisioning',
        key: 'p1',
        dedupe_key: `provisioning/p1/${i}`,
        fingerprint: `f-${i}`,
        payload: '{}',
        meta: '{}',
        scope: null,
        received_at: NOW,
        expires_at: NOW + HOUR_MS,
        secrets_expire_at: null,
      })
      .execute();
  }
  await db.deleteFrom('events').where('seq', '<=', deleteThrough).execute();
}

async function watermarkOf(store: Store): Promise<number> {
  return new EventLog(store.db, HOUR_MS, store.dialect, store.execute).purgedThrough();
}

/** What a purge does to the watermark, on a migrated store whose events all expire at NOW + HOUR_MS. */
function purgesRaiseIt(get: () => Store, highest: number) {
  it('is raised by a purge to the highest number it deletes, and not lowered by one that deletes nothing', async () => {
    const log = new EventLog(get().db, HOUR_MS, get().dialect, get().execute);
    expect(await log.purgeExpired(NOW)).toBe(0);
    expect(await log.purgedThrough()).toBeLessThan(highest);
    expect(await log.purgeExpired(NOW + HOUR_MS)).toBeGreaterThan(0);
    expect(await log.purgedThrough()).toBe(highest);
    expect(await log.purgeExpired(NOW + 2 * HOUR_MS)).toBe(0);
    expect(await log.purgedThrough()).toBe(highest);
  });
}

describe('migration 016 on a SQLite store', () => {
  const stores: Store[] = [];
  const dirs: string[] = [];

  async function migrated(count: number, deleteThrough: number): Promise<Store> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'event-purge-watermark-'));
    dirs.push(dir);
    const old = new Kysely<any>({
      dialect: new GroupCommitSqliteDialect(new SQLite(path.join(dir, 'gateway.sqlite'))),
    });
    await fillBefore016(old, 'sqlite', count, deleteThrough);
    await old.destroy();
    const store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
    stores.push(store);
    return store;
  }

  let partly: Store;
  beforeAll(async () => {
    partly = await migrated(5, 2);
  });
  afterAll(async () => {
    for (const store of stores) await store.close();
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('starts below the oldest stored event', async () => {
    expect(await watermarkOf(partly)).toBe(2);
  });

  it('starts at the highest number given out when every event was purged', async () => {
    expect(await watermarkOf(await migrated(4, 4))).toBe(4);
  });

  it('starts at 0 on a new store', async () => {
    expect(await watermarkOf(await migrated(0, 0))).toBe(0);
  });

  purgesRaiseIt(() => partly, 5);
});

describe('migration 016 on a PostgreSQL database', () => {
  let server: TestPostgres;
  const stores: Store[] = [];

  async function migrated(name: string, count: number, deleteThrough: number): Promise<Store> {
    const url = await server.createDatabase(name);
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const old = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    await fillBefore016(old, 'postgres', count, deleteThrough);
    await old.destroy();
    const store = await openStore({
      dataDir: '/nonexistent',
      databaseUrl: url,
      logger: createLogger({ level: 'silent' }),
    });
    stores.push(store);
    return store;
  }

  let partly: Store;
  beforeAll(async () => {
    server = await startPostgres();
    partly = await migrated('purge_watermark_partly', 5, 2);
  }, 120_000);
  afterAll(async () => {
    for (const store of stores) await store.close();
    await server?.stop();
  });

  it('starts below the oldest stored event', async () => {
    expect(await watermarkOf(partly)).toBe(2);
  });

  it('starts at the highest number given out when every event was purged', async () => {
    expect(await watermarkOf(await migrated('purge_watermark_all', 4, 4))).toBe(4);
  });

  it('starts at 0 on a new database', async () => {
    expect(await watermarkOf(await migrated('purge_watermark_new', 0, 0))).toBe(0);
  });

  purgesRaiseIt(() => partly, 5);
});
