// Two stores of one process on one SQLite file (tests that start two gateways on one DATA_DIR, as replicas that hand
// a run over): a write on one while the other holds a write transaction waits for it, off the thread. SQLite's own
// wait (busy_timeout) would block the thread on which the other connection has to commit, and end in "database is
// locked" however long it lasts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';

import { GroupCommitSqliteDialect } from '../../src/store/sqlite-dialect.js';

interface Db {
  t: { v: number };
}

const opened: Array<Kysely<Db>> = [];
let dir: string;

afterEach(async () => {
  for (const db of opened.splice(0)) await db.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Two stores on one new file, each on its own connection; SQLite's wait for a lock is short, so a miss fails fast. */
async function twoStores(options: { syncWal?: boolean } = {}): Promise<[Kysely<Db>, Kysely<Db>]> {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'two-connections-'));
  const open = (file: string) => {
    const database = new SQLite(file);
    database.pragma('journal_mode = WAL');
    database.pragma('busy_timeout = 100');
    const db = new Kysely<Db>({ dialect: new GroupCommitSqliteDialect(database, options) });
    opened.push(db);
    return db;
  };
  const a = open(path.join(dir, 'one.sqlite'));
  // The same file by another spelling of its path.
  const b = open(path.join(dir, '.', 'one.sqlite'));
  await a.schema.createTable('t').addColumn('v', 'integer').execute();
  return [a, b];
}

const values = async (db: Kysely<Db>) => (await db.selectFrom('t').select('v').orderBy('v').execute()).map((r) => r.v);

describe('two stores of one process on one SQLite file', () => {
  it('a write waits for the other store’s open transaction, and both are written', async () => {
    const [a, b] = await twoStores();
    let commit!: () => void;
    const held = new Promise<void>((resolve) => (commit = resolve));
    let written!: () => void;
    const insideA = new Promise<void>((resolve) => (written = resolve));
    const transaction = a.transaction().execute(async (trx) => {
      await trx.insertInto('t').values({ v: 1 }).execute();
      written();
      await held;
    });
    await insideA;
    const outside = b.insertInto('t').values({ v: 2 }).execute();
    let settled = false;
    void outside.finally(() => (settled = true)).catch(() => undefined);
    // Turns of the event loop pass while A's transaction stays open: B's write is still waiting, not refused.
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    commit();
    await transaction;
    await outside;
    expect(await values(b)).toEqual([1, 2]);
  });

  it('a write in the turn in which the other store’s group opened waits for its commit, and both are written', async () => {
    const [a, b] = await twoStores({ syncWal: true });
    // A's write opens its group; B's, in the same turn, would begin its own write transaction while A's is open.
    const first = a.insertInto('t').values({ v: 1 }).execute();
    const second = b.insertInto('t').values({ v: 2 }).execute();
    await Promise.all([first, second]);
    expect(await values(a)).toEqual([1, 2]);
  });

  it('an explicit transaction waits for the other store’s group', async () => {
    const [a, b] = await twoStores({ syncWal: true });
    const first = a.insertInto('t').values({ v: 1 }).execute();
    const second = b.transaction().execute(async (trx) => {
      await trx.insertInto('t').values({ v: 2 }).execute();
      await sql`select 1`.execute(trx);
    });
    await Promise.all([first, second]);
    expect(await values(b)).toEqual([1, 2]);
  });
});
