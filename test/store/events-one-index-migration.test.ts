// Migration 014 replaces the events table's unique dedupe_key and its events_kind_key index with one unique index on
// (kind, key, dedupe_key) (docs/decisions/079): on SQLite by copying the table; on PostgreSQL in place, where the
// column's constraint stays for the previous release's replicas. A store that
// already holds events is migrated on each dialect, and what it held reads back as before: the same rows with the same
// sequence numbers (so cursors stay valid), repeats refused as duplicates or conflicts, a key's newest event and its
// replay after a cursor, and no sequence number given twice.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, sql, type LogEvent } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ownerCaller } from '../../src/auth/caller.js';
import { EventLog } from '../../src/events/index.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Database, type Dialect, type Store } from '../../src/store/index.js';
import { migrationProvider } from '../../src/store/migrations.js';
import { GroupCommitSqliteDialect } from '../../src/store/sqlite-dialect.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { postCompletion, registerVerifications, resumeWs } from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const BEFORE = '013_agent_plans_bind_their_document';
const RETENTION = 86_400_000;
const NOW = Date.now();
const OWNER = 'app:shop';
const OTHER = 'app:other';
const digest = (c: string) => c.repeat(64);

/** Rows as a release before 014 wrote them (seq left to the database), in order. */
const ROWS = [
  ['mobile-id', 'r1', `mobile-id@${OWNER}:r1`, 'f-r1', OWNER],
  ['verification', 'e1', `verification@${OWNER}:e1:${digest('a')}`, digest('a'), OWNER],
  ['provisioning', 'p1', 'provisioning/p1/1', 'f-p1-1', OWNER],
  ['mobile-id', 'r1', `mobile-id@${OTHER}:r1`, 'f-r1-other', OTHER],
  ['verification', 'e1', `verification@${OWNER}:e1:${digest('b')}`, digest('b'), OWNER],
  ['provisioning', 'p1', 'provisioning/p1/2', 'f-p1-2', OWNER],
  ['mobile-id', 'r2', 'mobile-id:r2', 'f-r2', null],
  ['provisioning', 'p1', 'provisioning/p1/3', 'f-p1-3', OWNER],
  // The newest, purged below: its number was given out and must not be given again.
  ['mobile-id', 'r9', `mobile-id@${OWNER}:r9`, 'f-r9', OWNER],
] as const;

async function fillBefore014(db: Kysely<any>): Promise<number> {
  const migrated = await new Migrator({ db, provider: migrationProvider(dialectOf(db)) }).migrateTo(BEFORE);
  if (migrated.error) throw migrated.error;
  for (const [kind, key, dedupeKey, fingerprint, scope] of ROWS) {
    await db
      .insertInto('events')
      .values({
        kind,
        key,
        dedupe_key: dedupeKey,
        fingerprint,
        payload: JSON.stringify({ kind, key, dedupeKey }),
        meta: '{}',
        scope,
        received_at: NOW,
        expires_at: NOW + RETENTION,
        secrets_expire_at: kind === 'mobile-id' ? NOW + 3_600_000 : null,
      })
      .execute();
  }
  const { max } = await db
    .selectFrom('events')
    .select((eb) => eb.fn.max('seq').as('max'))
    .executeTakeFirstOrThrow();
  await db.deleteFrom('events').where('seq', '=', max).execute();
  return Number(max);
}

const dialects = new WeakMap<Kysely<any>, Dialect>();
const dialectOf = (db: Kysely<any>) => dialects.get(db)!;

async function rowsOf(db: Kysely<Database>): Promise<string[]> {
  const rows = await db.selectFrom('events').selectAll().orderBy('seq').execute();
  return rows.map((r) =>
    // bigint columns as numbers, however the connection reads them.
    JSON.stringify({
      ...r,
      seq: Number(r.seq),
      received_at: Number(r.received_at),
      expires_at: Number(r.expires_at),
      secrets_expire_at: r.secrets_expire_at === null ? null : Number(r.secrets_expire_at),
    }),
  );
}

/** What every dialect must read back after the migration; `burnt` is the number of the purged newest event. */
function behavesAsBefore(get: () => { store: Store; burnt: number; before: string[] }) {
  const log = () => {
    const { store } = get();
    return new EventLog(store.db, RETENTION, store.dialect, store.execute);
  };
  const seqOf = async (dedupeKey: string) =>
    Number(
      (
        await get()
          .store.db.selectFrom('events')
          .select('seq')
          .where('dedupe_key', '=', dedupeKey)
          .executeTakeFirstOrThrow()
      ).seq,
    );

  it('keeps every row with its sequence number', async () => {
    expect(await rowsOf(get().store.db)).toEqual(get().before);
  });

  it('numbers a new event past every number given before, the purged newest included', async () => {
    // The first write after the migration: a refused insert may take a number on SQLite too, so none runs before it.
    const created = await log().append({
      kind: 'provisioning',
      key: 'p2',
      dedupeKey: 'provisioning/p2/1',
      payload: { revision: 1 },
      scope: OWNER,
    });
    expect(created.status).toBe('created');
    expect(created.event.seq).toBeGreaterThan(get().burnt);
    expect((await rowsOf(get().store.db)).slice(0, -1)).toEqual(get().before);
  });

  it('refuses a repeat of a stored event as a duplicate, another payload under its dedupe key as a conflict', async () => {
    const events = log();
    const stored = await rowsOf(get().store.db);
    const first = { kind: 'mobile-id', key: 'r1', dedupeKey: `mobile-id@${OWNER}:r1`, payload: {}, scope: OWNER };
    const duplicate = await events.append({ ...first, fingerprint: 'f-r1' });
    expect(duplicate.status).toBe('duplicate');
    expect(duplicate.event.seq).toBe(await seqOf(first.dedupeKey));
    expect((await events.append({ ...first, fingerprint: 'another' })).status).toBe('conflict');
    const callback = `verification@${OWNER}:e1:${digest('a')}`;
    const again = await events.append({
      kind: 'verification',
      key: 'e1',
      dedupeKey: callback,
      payload: {},
      fingerprint: digest('a'),
    });
    expect(again).toMatchObject({ status: 'duplicate', event: { seq: await seqOf(callback) } });
    expect(await events.byDedupeKey('mobile-id', 'r2', 'mobile-id:r2')).toMatchObject({
      key: 'r2',
      fingerprint: 'f-r2',
    });
    expect(await events.byDedupeKey('mobile-id', 'r1', 'mobile-id:r2')).toBeNull();
    expect(await rowsOf(get().store.db)).toEqual(stored);
  });

  it('reads a key newest first and replays it after a cursor, in order', async () => {
    const events = log();
    expect((await events.latest('verification', 'e1'))?.dedupeKey).toBe(`verification@${OWNER}:e1:${digest('b')}`);
    expect((await events.latest('mobile-id', 'r1', ownerCaller(OTHER)))?.scope).toBe(OTHER);
    expect((await events.latest('mobile-id', 'r1', ownerCaller(OWNER)))?.scope).toBe(OWNER);
    const all = await events.range(['provisioning'], 0, Number.MAX_SAFE_INTEGER, { key: 'p1' }, 100);
    expect(all.map((e) => e.dedupeKey)).toEqual(['provisioning/p1/1', 'provisioning/p1/2', 'provisioning/p1/3']);
    const resumed = await events.range(['provisioning'], all[0]!.seq, Number.MAX_SAFE_INTEGER, { key: 'p1' }, 100);
    expect(resumed.map((e) => e.seq)).toEqual([all[1]!.seq, all[2]!.seq]);
  });
}

describe('migration 014 on a SQLite store that holds events', () => {
  let dir: string;
  let store: Store;
  let burnt: number;
  let before: string[];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'events-one-index-'));
    const old = new Kysely<any>({
      dialect: new GroupCommitSqliteDialect(new SQLite(path.join(dir, 'gateway.sqlite'))),
    });
    dialects.set(old, 'sqlite');
    burnt = await fillBefore014(old);
    before = await rowsOf(old);
    await old.destroy();
    store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
  });

  afterAll(async () => {
    await store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('leaves one unique index where the unique dedupe_key and events_kind_key were', async () => {
    const { rows } = await sql<{ name: string; sql: string | null }>`select name, sql from sqlite_schema
      where type = 'index' and tbl_name = 'events' order by name`.execute(store.db);
    expect(rows.map((r) => r.name)).toEqual(['events_expires', 'events_kind_key_dedupe', 'events_secrets_expire']);
    expect(rows[1]!.sql).toMatch(
      /create unique index "events_kind_key_dedupe" on "events" \("kind", "key", "dedupe_key"\)/i,
    );
  });

  behavesAsBefore(() => ({ store, burnt, before }));

  it("reads a key's newest event, its replay and a dedupe key through the unique index", async () => {
    // The plans of the event log's own statements, on the migrated file.
    const database = new SQLite(path.join(dir, 'gateway.sqlite'));
    const statements: Array<{ sql: string; parameters: readonly unknown[] }> = [];
    const db = new Kysely<Database>({
      dialect: new GroupCommitSqliteDialect(database),
      log: (e: LogEvent) => void statements.push({ sql: e.query.sql, parameters: e.query.parameters }),
    });
    try {
      const events = new EventLog(db, RETENTION, 'sqlite');
      await events.latest('mobile-id', 'r1');
      await events.latest('mobile-id', 'r1', ownerCaller(OWNER));
      await events.byDedupeKey('mobile-id', 'r1', `mobile-id@${OWNER}:r1`);
      await events.range(['provisioning'], 1, 100, { key: 'p1' }, 10);
      await events.range(['provisioning'], 1, 100, { key: 'p1', reader: ownerCaller(OWNER) }, 10);
      const plans = statements.map((s) =>
        (database.prepare(`explain query plan ${s.sql}`).all(...s.parameters) as Array<{ detail: string }>)
          .map((r) => r.detail)
          .join('; '),
      );
      expect(plans).toHaveLength(5);
      // No plan scans the table; each searches the unique index by kind and key. The newest-event reads find the
      // key's largest seq there and then read that one row by its rowid (docs/decisions/117).
      for (const plan of plans) {
        expect(plan).toMatch(/SEARCH events USING (COVERING )?INDEX events_kind_key_dedupe \(kind=\? AND key=\?/);
        expect(plan).not.toMatch(/SCAN/);
      }
      for (const plan of plans.slice(0, 2))
        expect(plan).toMatch(/^SEARCH events USING INTEGER PRIMARY KEY \(rowid=\?\); SCALAR SUBQUERY/);
      expect(plans[2]).toContain('kind=? AND key=? AND dedupe_key=?');
    } finally {
      await db.destroy();
    }
  });

  it('a start after the copy committed but before the migration was recorded keeps every row and number', async () => {
    const rows = await rowsOf(store.db);
    const { rows: mark } = await sql<{ seq: number }>`select seq from sqlite_sequence where name = 'events'`.execute(
      store.db,
    );
    await store.close();
    const database = new SQLite(path.join(dir, 'gateway.sqlite'));
    // The migrations after 014 ran after it was recorded: a crash before that ran none of them either.
    database.exec(`delete from kysely_migration where name >= '014_events_one_unique_index';
      drop table key_app_names;
      drop table event_purge;
      drop table wildcard_app_names;`);
    database.close();
    store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
    expect(await rowsOf(store.db)).toEqual(rows);
    const { rows: after } = await sql<{ seq: number }>`select seq from sqlite_sequence where name = 'events'`.execute(
      store.db,
    );
    expect(after).toEqual(mark);
    const { rows: recorded } = await sql`select name from kysely_migration
      where name = '014_events_one_unique_index'`.execute(store.db);
    expect(recorded).toHaveLength(1);
  });
});

/**
 * Turns a migrated file back into what the previous release leaves (the events table of migrations 001 and 002, 014
 * and the migrations after it not applied), keeping every row and number.
 */
function asBefore014(dataDir: string): void {
  const database = new SQLite(path.join(dataDir, 'gateway.sqlite'));
  try {
    database.exec(`begin;
      create table events_previous (seq integer primary key autoincrement, kind text not null, key text not null,
        dedupe_key text not null unique, fingerprint text not null, payload text not null, meta text not null,
        scope text, received_at bigint not null, expires_at bigint not null, secrets_expire_at bigint);
      insert into events_previous select seq, kind, key, dedupe_key, fingerprint, payload, meta, scope, received_at,
        expires_at, secrets_expire_at from events order by seq;
      drop table events;
      alter table events_previous rename to events;
      create index events_kind_key on events (kind, key, seq);
      create index events_expires on events (expires_at);
      create index events_secrets_expire on events (secrets_expire_at);
      delete from kysely_migration where name >= '014_events_one_unique_index';
      drop table key_app_names;
      drop table event_purge;
      drop table wildcard_app_names;
      commit;`);
  } finally {
    database.close();
  }
}

describe('a gateway upgraded across migration 014 (SQLite)', () => {
  const KEY = 'key-a';
  let dir: string;
  let t: TestGateway | undefined;

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'events-one-index-gateway-'));
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('resumes a stream from a cursor taken before the upgrade, and does not deliver a repeat of a stored callback again', async () => {
    const env = { DATA_DIR: dir, GATEWAY_API_KEYS: KEY, SANDBOX_CALLBACK_DELAY_MS: '600000' };
    t = await startTestGateway(env);
    const [id, url] = [...(await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1))][0]!;
    const first = await resumeWs(t, KEY, null);
    await waitForSubscribers(t, 'verification');
    await postCompletion(url!, id!, 'a1');
    await waitFor(() => first.events.length === 1, 20_000, 'the first event');
    const cursor = first.events[0]!.cursor;
    await first.close();
    await postCompletion(url!, id!, 'a2');
    await t.close();
    t = undefined;

    asBefore014(dir);
    t = await startTestGateway(env);
    expect(t.logs()).toContain('014_events_one_unique_index');
    // The callback address names the first gateway's port; the path is what identifies it.
    const upgraded = `${t.url}${new URL(url!).pathname}`;
    // An exact repeat of a stored callback is a duplicate: were it stored again, the replay below would hold it.
    await postCompletion(upgraded, id!, 'a1');
    const resumed = await resumeWs(t, KEY, cursor);
    await waitFor(() => resumed.events.length === 1, 20_000, 'the replay after the cursor');
    await postCompletion(upgraded, id!, 'a3');
    await waitFor(() => resumed.events.length === 2, 20_000, 'the live event');
    expect(resumed.events.map((e) => e.n)).toEqual(['a2', 'a3']);
    expect(resumed.errors).toEqual([]);
    await resumed.close();
  }, 60_000);
});

describe('migration 014 on a PostgreSQL database that holds events', () => {
  let server: TestPostgres;
  let store: Store;
  let burnt: number;
  let before: string[];

  beforeAll(async () => {
    server = await startPostgres();
    const url = await server.createDatabase('events_one_index');
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const old = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    dialects.set(old, 'postgres');
    burnt = await fillBefore014(old);
    before = await rowsOf(old);
    await old.destroy();
    store = await openStore({ dataDir: '/nonexistent', databaseUrl: url, logger: createLogger({ level: 'silent' }) });
  }, 120_000);

  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  it('adds the unique index and drops events_kind_key, keeping the column constraint the previous release names', async () => {
    const { rows } = await sql<{ name: string; def: string }>`select indexname as name, indexdef as def from pg_indexes
      where tablename = 'events' order by indexname`.execute(store.db);
    expect(rows.map((r) => r.name)).toEqual([
      'events_dedupe_key_key',
      'events_expires',
      'events_kind_key_dedupe',
      'events_pkey',
      'events_secrets_expire',
    ]);
    expect(rows[2]!.def).toMatch(
      /CREATE UNIQUE INDEX events_kind_key_dedupe ON public.events USING btree \(kind, key, dedupe_key\)/,
    );
  });

  behavesAsBefore(() => ({ store, burnt, before }));

  it("takes the previous release's insert while its replicas still serve (a rolling update)", async () => {
    const insert = (dedupeKey: string, key: string) =>
      sql<{ seq: number }>`insert into events
      (kind, key, dedupe_key, fingerprint, payload, meta, scope, received_at, expires_at)
      values ('mobile-id', ${key}, ${dedupeKey}, 'f', '{}', '{}', null, ${NOW}, ${NOW + RETENTION})
      on conflict (dedupe_key) do nothing returning seq`.execute(store.db);
    expect((await insert('mobile-id:r2', 'r2')).rows).toEqual([]);
    expect((await insert('mobile-id:r3', 'r3')).rows).toHaveLength(1);
  });
});
