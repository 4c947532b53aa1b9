// The owner rule is written once (src/auth/tenancy.ts): readableBy in code, and its SQL twin readableByInSql for the
// queries that filter rows by their reader (the event log's newest-event reads and replays). The two must admit the
// same rows: the reader's own and the shared ones (a null owner), never another app's.
import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ownerCaller, scopeOfApp, scopeOfKeyDigest, sha256 } from '../../src/auth/caller.js';
import { readableBy, readableByInSql } from '../../src/auth/tenancy.js';

interface Things {
  things: { id: string; owner: string | null };
}

const OWNERS = [null, scopeOfApp('shop'), scopeOfApp('crm'), scopeOfKeyDigest(sha256('bare key')), 'open'];

describe('the owner rule in SQL', () => {
  let db: Kysely<Things>;

  beforeAll(async () => {
    db = new Kysely<Things>({ dialect: new SqliteDialect({ database: new SQLite(':memory:') }) });
    await db.schema.createTable('things').addColumn('id', 'text').addColumn('owner', 'text').execute();
    await db
      .insertInto('things')
      .values(OWNERS.map((owner, i) => ({ id: `thing-${i}`, owner })))
      .execute();
  });
  afterAll(async () => {
    await db.destroy();
  });

  it.each(OWNERS.filter((o) => o !== null))('reads for %s exactly the rows readableBy admits', async (scope) => {
    const reader = ownerCaller(scope);
    const rows = await db
      .selectFrom('things')
      .select('id')
      .where((eb) => readableByInSql(eb, 'owner', reader))
      .orderBy('id')
      .execute();
    const expected = OWNERS.flatMap((owner, i) => (readableBy(reader, owner) ? [`thing-${i}`] : []));
    expect(rows.map((r) => r.id)).toEqual(expected);
    expect(expected).toEqual(['thing-0', `thing-${OWNERS.indexOf(scope)}`]);
  });
});
