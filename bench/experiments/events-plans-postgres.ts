/**
 * The plans PostgreSQL picks for the event log's reads by key on a migrated database (docs/decisions/079): an embedded
 * server, 20,000 mobile-ID successes and 2,000 provisioning events (ten per key) appended through the `EventLog`,
 * ANALYZE, then EXPLAIN of the newest event of a key (with and without a reader), the event under a dedupe key, the
 * replay of a key after a cursor and the append's `NOT EXISTS`, and the newest-event read as a generic plan (what a
 * prepared statement reused by the driver may get).
 *
 *   npx tsx bench/experiments/events-plans-postgres.ts
 */
import { sql, type RawBuilder } from 'kysely';

import { startEmbeddedPostgres } from '../../scripts/embedded-postgres.js';
import { EventLog } from '../../src/events/log.js';
import { createLogger } from '../../src/logger.js';
import { openStore } from '../../src/store/index.js';
import { sampleAppend } from './sample-event.js';

const pg = await startEmbeddedPostgres();
try {
  const url = await pg.createDatabase('plans');
  const store = await openStore({
    dataDir: '/nonexistent',
    databaseUrl: url,
    logger: createLogger({ level: 'silent' }),
  });
  const log = new EventLog(store.db, 86_400_000, 'postgres', store.execute);
  const keys: string[] = [];
  for (let b = 0; b < 200; b++) {
    await Promise.all(
      Array.from({ length: 100 }, async () => {
        const event = sampleAppend();
        keys.push(event.key);
        await log.append(event);
      }),
    );
  }
  for (let i = 0; i < 2000; i++)
    await log.append({
      kind: 'provisioning',
      key: `p${i % 200}`,
      dedupeKey: `provisioning/p${i % 200}/${i}`,
      payload: { i },
      scope: 'app:bench',
    });
  await sql`analyze events`.execute(store.db);
  const k = sql.lit(keys[5]!);
  const show = async (name: string, query: RawBuilder<unknown>) => {
    const { rows } = await sql<{ 'QUERY PLAN': string }>`explain ${query}`.execute(store.db);
    console.log(`${name}:\n  ${rows.map((r) => r['QUERY PLAN']).join('\n  ')}`);
  };
  await show('latest', sql`select * from events where kind = 'mobile-id' and key = ${k} order by seq desc limit 1`);
  await show(
    'latest readable',
    sql`select * from events where kind = 'mobile-id' and key = ${k} and (scope = 'app:bench' or scope is null)
      order by seq desc limit 1`,
  );
  await show(
    'byDedupeKey',
    sql`select * from events where kind = 'mobile-id' and key = ${k} and dedupe_key = ${sql.lit(`mobile-id@app:bench:${keys[5]!}`)}`,
  );
  await show(
    'range by key',
    sql`select * from events where seq > 5 and seq <= 100000 and kind in ('provisioning') and key = 'p7'
      order by seq limit 100`,
  );
  await show(
    'insert NOT EXISTS',
    sql`select 1 where not exists (select 1 from events where kind = 'mobile-id' and key = ${k} and dedupe_key = 'x')`,
  );
  await store.db.connection().execute(async (c) => {
    await sql`set plan_cache_mode = force_generic_plan`.execute(c);
    await sql`prepare latest(text, text) as
      select * from events where kind = $1 and key = $2 order by seq desc limit 1`.execute(c);
    const { rows } = await sql<{ 'QUERY PLAN': string }>`explain execute latest('mobile-id', ${k})`.execute(c);
    console.log(`latest (generic plan):\n  ${rows.map((r) => r['QUERY PLAN']).join('\n  ')}`);
  });
  await store.close();
} finally {
  await pg.stop();
}
