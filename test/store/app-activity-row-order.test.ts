// Every replica writes the apps it saw to app_activity in one multi-row upsert (src/store/app-activity.ts flush). On
// PostgreSQL the upsert locks its rows one by one, in the order of its VALUES: two replicas that write the same apps
// each in the order it saw them can each hold a row the other waits for, a deadlock. The rows are written in the order
// of their keys instead, the same on every replica. A deadlock is a matter of timing, which a test must not depend
// on: this test reads the row order of the statements themselves, compiled by Kysely's PostgreSQL dialect and
// recorded by a driver that answers every statement with no rows.
import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
} from 'kysely';
import { describe, expect, it } from 'vitest';

import { AppActivity } from '../../src/store/app-activity.js';
import type { Database } from '../../src/store/schema.js';

/** A PostgreSQL Kysely whose statements are recorded, not sent: `apps()` lists each statement's rows' keys. */
function recordingPostgres(): { db: Kysely<Database>; apps: () => string[][] } {
  const statements: CompiledQuery[] = [];
  const connection: DatabaseConnection = {
    executeQuery: async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
      statements.push(query);
      return { rows: [] };
    },
    streamQuery: () => {
      throw new Error('not used');
    },
  };
  const driver: Driver = {
    init: async () => undefined,
    acquireConnection: async () => connection,
    beginTransaction: async () => undefined,
    commitTransaction: async () => undefined,
    rollbackTransaction: async () => undefined,
    releaseConnection: async () => undefined,
    destroy: async () => undefined,
  };
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createIntrospector: (k) => new PostgresIntrospector(k),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
  const apps = () =>
    statements.map((s) => {
      expect(s.sql).toMatch(/^insert into "app_activity" \("app", "source", "scopes", "last_seen_at"\) values /);
      // Four parameters a row, its key first, then the three of the conflict's update (none: it reads `excluded`).
      return s.parameters.filter((_, i) => i % 4 === 0) as string[];
    });
  return { db, apps };
}

const byKey = (keys: string[]) => [...keys].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

describe("a replica's flush of the apps it saw", () => {
  it('writes the rows in the order of their keys, whatever the order they were seen in', async () => {
    const seen = ['zeta', 'alpha', 'mid', 'beta', 'omega'];
    const replicas = [seen, [...seen].reverse()].map((order) => {
      const { db, apps } = recordingPostgres();
      const activity = new AppActivity(db, () => 1_000);
      for (const app of order) activity.seen(app, app === 'mid' ? 'JWT' : 'API_KEY', 'cloud:read');
      return { activity, apps };
    });
    for (const r of replicas) await r.activity.flush();
    const expected = byKey(['zeta', 'alpha', 'jwt/mid', 'beta', 'omega']);
    expect(replicas.map((r) => r.apps())).toEqual([[expected], [expected]]);
  });

  it('in the order of their keys across its statements of 500 rows each', async () => {
    const { db, apps } = recordingPostgres();
    const activity = new AppActivity(db, () => 1_000);
    // 1200 apps, seen in an order that is not theirs.
    const seen = Array.from({ length: 1200 }, (_, i) => `app-${String((i * 7919) % 1200).padStart(4, '0')}`);
    for (const app of seen) activity.seen(app, 'API_KEY', 'cloud:read');
    await activity.flush();
    const statements = apps();
    expect(statements.map((s) => s.length)).toEqual([500, 500, 200]);
    expect(statements.flat()).toEqual(byKey(seen));
  });
});
