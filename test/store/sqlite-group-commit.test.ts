import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { openStore } from '../../src/store/index.js';
import { GroupCommitSqliteDialect } from '../../src/store/sqlite-dialect.js';

interface Db {
  items: { id: number; name: string };
}

describe('SQLite group commit: a write is acknowledged only once it is committed', () => {
  let dir: string;
  let file: string;
  let database: SQLite.Database;
  let db: Kysely<Db>;
  let dialect: GroupCommitSqliteDialect;
  /** A second, independent connection: it sees only what is committed. */
  let observer: SQLite.Database;
  let execs: string[];

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'group-commit-'));
    file = path.join(dir, 'db.sqlite');
    database = new SQLite(file);
    database.pragma('journal_mode = WAL');
    database.pragma('synchronous = FULL');
    database.exec('create table items (id integer primary key, name text not null)');
    execs = [];
    const exec = database.exec.bind(database);
    vi.spyOn(database, 'exec').mockImplementation((source: string) => {
      execs.push(source);
      return exec(source);
    });
    dialect = new GroupCommitSqliteDialect(database);
    db = new Kysely<Db>({ dialect });
    observer = new SQLite(file, { readonly: true });
  });

  afterEach(async () => {
    observer.close();
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const committed = () => (observer.prepare('select count(*) as n from items').get() as { n: number }).n;

  it('commits the writes of one turn of the event loop together, once', async () => {
    const writes = Array.from({ length: 10 }, (_, i) => db.insertInto('items').values({ id: i + 1, name: `n${i}` }).execute());
    await Promise.all(writes);
    expect(execs.filter((s) => s === 'commit')).toHaveLength(1);
    expect(committed()).toBe(10);
  });

  it('settles a write only after its COMMIT: another connection already sees it', async () => {
    let seenAtResolve = -1;
    const write = db
      .insertInto('items')
      .values({ id: 1, name: 'a' })
      .execute()
      .then(() => {
        seenAtResolve = committed();
      });
    // The statement has run (or is about to) but nothing is committed yet.
    await Promise.resolve();
    expect(committed()).toBe(0);
    await write;
    expect(seenAtResolve).toBe(1);
  });

  it('rejects a failing statement alone; the other writes of its turn are committed', async () => {
    await db.insertInto('items').values({ id: 1, name: 'first' }).execute();
    const results = await Promise.allSettled([
      db.insertInto('items').values({ id: 2, name: 'b' }).execute(),
      db.insertInto('items').values({ id: 1, name: 'duplicate' }).execute(),
      db.insertInto('items').values({ id: 3, name: 'c' }).execute(),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(committed()).toBe(3);
    expect((observer.prepare('select name from items where id = 1').get() as { name: string }).name).toBe('first');
  });

  it('answers a read issued while writes are pending only after they are committed', async () => {
    const order: string[] = [];
    const write = db.insertInto('items').values({ id: 1, name: 'a' }).execute().then(() => order.push('write'));
    const read = db.selectFrom('items').selectAll().execute().then((rows) => {
      order.push('read');
      return rows;
    });
    const [, rows] = await Promise.all([write, read]);
    expect(order).toEqual(['write', 'read']);
    expect(committed()).toBe(1);
    expect(rows).toEqual([{ id: 1, name: 'a' }]);
  });

  it('commits pending writes before an explicit transaction, which then runs alone', async () => {
    const before = db.insertInto('items').values({ id: 1, name: 'before' }).execute();
    const tx = db.transaction().execute(async (trx) => {
      await trx.insertInto('items').values({ id: 2, name: 'in tx' }).execute();
      // Another writer outside the transaction waits for it to end.
      expect(committed()).toBe(1);
      await trx.insertInto('items').values({ id: 3, name: 'in tx' }).execute();
    });
    const outside = db.insertInto('items').values({ id: 4, name: 'outside' }).execute();
    await Promise.all([before, tx, outside]);
    expect(committed()).toBe(4);
  });

  it('rolls an explicit transaction back as a whole', async () => {
    await expect(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('items').values({ id: 1, name: 'gone' }).execute();
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    await db.insertInto('items').values({ id: 2, name: 'kept' }).execute();
    expect(committed()).toBe(1);
  });

  it('writes statements together in the turn\'s one COMMIT, and undoes all of them when one fails', async () => {
    const insert = (id: number, name: string) => db.insertInto('items').values({ id, name }).compile();
    const other = db.insertInto('items').values({ id: 1, name: 'other' }).execute();
    const together = dialect.writeTogether([insert(2, 'b'), insert(3, 'c')]);
    await Promise.all([other, together]);
    expect(execs.filter((s) => s === 'commit')).toHaveLength(1);
    expect(committed()).toBe(3);

    // id 1 exists: the second statement fails, and the first of the unit is undone with it; the turn's other write stays.
    const results = await Promise.allSettled([dialect.writeTogether([insert(4, 'd'), insert(1, 'duplicate')]), db.insertInto('items').values({ id: 5, name: 'e' }).execute()]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect((observer.prepare('select id from items order by id').all() as { id: number }[]).map((r) => r.id)).toEqual([1, 2, 3, 5]);
  });

  it('re-uses prepared statements instead of preparing every query again', async () => {
    const prepare = vi.spyOn(database, 'prepare');
    for (let i = 0; i < 5; i++) await db.selectFrom('items').selectAll().where('id', '=', i).execute();
    expect(prepare).toHaveBeenCalledTimes(1);
  });
});

describe('SQLITE_SYNCHRONOUS', () => {
  it('is FULL unless set, accepts NORMAL in any case, and refuses anything else', () => {
    expect(loadConfig({}).sqliteSynchronous).toBe('FULL');
    expect(loadConfig({ SQLITE_SYNCHRONOUS: 'normal' }).sqliteSynchronous).toBe('NORMAL');
    expect(() => loadConfig({ SQLITE_SYNCHRONOUS: 'OFF' })).toThrow(/SQLITE_SYNCHRONOUS: must be FULL or NORMAL/);
  });

  it('is the synchronous setting the store opens SQLite with', async () => {
    for (const [mode, level] of [
      ['NORMAL', 1],
      ['FULL', 2],
    ] as const) {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sync-'));
      const store = await openStore({ dataDir, logger: createLogger({ level: 'silent' }), sqliteSynchronous: mode });
      try {
        const { rows } = await sql<{ synchronous: number }>`pragma synchronous`.execute(store.db);
        expect(rows[0]!.synchronous).toBe(level);
      } finally {
        await store.close();
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    }
  });
});
