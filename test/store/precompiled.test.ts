import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { precompiled } from '../../src/store/precompiled.js';

interface Db {
  items: { id: number; name: string; state: string; note: string | null };
}

describe('precompiled statements', () => {
  let db: Kysely<Db>;

  beforeEach(() => {
    const database = new SQLite(':memory:');
    database.exec('create table items (id integer primary key, name text not null, state text not null, note text)');
    db = new Kysely<Db>({ dialect: new SqliteDialect({ database }) });
  });

  afterEach(async () => {
    await db.destroy();
  });

  it("compiles once and binds each call's arguments, keeping the values the statement wrote itself", async () => {
    const build = vi.fn((id: number, name: string) =>
      db
        .insertInto('items')
        .values({ id, name, state: 'new', note: null })
        .onConflict((oc) => oc.column('id').doUpdateSet({ name, state: 'renamed' })),
    );
    const insert = precompiled(build);
    await db.executeQuery(insert(1, 'a'));
    await db.executeQuery(insert(2, 'b'));
    await db.executeQuery(insert(1, 'a2'));
    expect(build).toHaveBeenCalledTimes(1);
    expect(insert(3, 'x').sql).toBe(insert(4, 'y').sql);
    const rows = await db.selectFrom('items').selectAll().orderBy('id').execute();
    expect(rows).toEqual([
      { id: 1, name: 'a2', state: 'renamed', note: null },
      { id: 2, name: 'b', state: 'new', note: null },
    ]);
  });

  it('refuses a statement that does not use an argument as a value', () => {
    const unused = precompiled((id: number, _name: string) => db.deleteFrom('items').where('id', '=', id));
    expect(() => unused(1, 'a')).toThrow(/must use its argument 1 as a value/);
  });
});
