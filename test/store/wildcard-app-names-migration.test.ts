// Migration 017 adds the names an identity provider that accepts any app name (`*`) accepted
// (src/store/key-app-names.ts), filled from what the database already knows of JWT apps: the operator's list of apps (`app_activity`), whose rows
// `jwt/<name>` (and, written before those, rows under the bare name with the source JWT) are JWT apps' sightings. The
// key apps' rows are not JWT apps'. A gateway whose key app has the name of a JWT app seen before then does not start.
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ConfigError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Dialect, type Store } from '../../src/store/index.js';
import { migrationProvider } from '../../src/store/migrations.js';
import { GroupCommitSqliteDialect } from '../../src/store/sqlite-dialect.js';
import { appsFile, startTestGateway, tempDataDir } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const BEFORE = '016_event_purge_watermark';
const NOW = Date.now();

/** Migrates to 016 and writes the operator's list of apps as gateways before 017 wrote it. */
async function fillBefore017(db: Kysely<any>, dialect: Dialect): Promise<void> {
  const migrated = await new Migrator({ db, provider: migrationProvider(dialect) }).migrateTo(BEFORE);
  if (migrated.error) throw migrated.error;
  await db
    .insertInto('app_activity')
    .values([
      { app: 'jwt/portal', source: 'JWT', scopes: 'identity:read', last_seen_at: NOW - 2_000 },
      // A JWT app's row from before the `jwt/` rows: its bare name, source JWT.
      { app: 'legacy-portal', source: 'JWT', scopes: 'identity:read', last_seen_at: NOW - 3_000 },
      // A key app's rows: a name of the apps file, and one that was also a JWT app (shop=shop).
      { app: 'billing', source: 'APPS_FILE', scopes: 'identity:read', last_seen_at: NOW - 1_000 },
      { app: 'shop', source: 'GATEWAY_API_KEYS', scopes: 'identity:read', last_seen_at: NOW - 1_000 },
      { app: 'jwt/shop', source: 'JWT', scopes: 'identity:read', last_seen_at: NOW - 4_000 },
    ])
    .execute();
}

async function acceptedNames(store: Store): Promise<Array<{ app: string; first_accepted_at: number }>> {
  const rows = await store.db.selectFrom('wildcard_app_names').selectAll().orderBy('app').execute();
  return rows.map((r) => ({ app: r.app, first_accepted_at: Number(r.first_accepted_at) }));
}

const EXPECTED = [
  { app: 'legacy-portal', first_accepted_at: NOW - 3_000 },
  { app: 'portal', first_accepted_at: NOW - 2_000 },
  { app: 'shop', first_accepted_at: NOW - 4_000 },
];

describe('migration 017 on a SQLite store', () => {
  const dir = tempDataDir('wildcard-names-migration-');
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("records every JWT app app_activity has seen, and no key app's name", async () => {
    const old = new Kysely<any>({
      dialect: new GroupCommitSqliteDialect(new SQLite(path.join(dir, 'gateway.sqlite'))),
    });
    await fillBefore017(old, 'sqlite');
    await old.destroy();
    const store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
    try {
      expect(await acceptedNames(store)).toEqual(EXPECTED);
    } finally {
      await store.close();
    }
  });

  it('a gateway on it whose key app has the name of a JWT app seen before does not start', async () => {
    const file = appsFile('wildcard-names-migration-apps-', [
      { name: 'portal', scopes: ['identity:read'], key: 'portal-key-0123456789abcdef' },
    ]);
    const started = await startTestGateway({ DATA_DIR: dir, GATEWAY_APPS_FILE: file }).then(
      async (t) => {
        await t.close();
        return null;
      },
      (err: unknown) => err,
    );
    expect(started).toBeInstanceOf(ConfigError);
    expect((started as ConfigError).message).toMatch(/the app portal \(GATEWAY_APPS_FILE\).*portal=portal/);
  });
});

describe('migration 017 on a PostgreSQL database', () => {
  let server: TestPostgres;
  beforeAll(async () => {
    server = await startPostgres();
  }, 120_000);
  afterAll(() => server?.stop());

  it("records every JWT app app_activity has seen, and no key app's name", async () => {
    const url = await server.createDatabase('wildcard_names_migration');
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const old = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    await fillBefore017(old, 'postgres');
    await old.destroy();
    const store = await openStore({
      dataDir: '/nonexistent',
      databaseUrl: url,
      logger: createLogger({ level: 'silent' }),
    });
    try {
      expect(await acceptedNames(store)).toEqual(EXPECTED);
    } finally {
      await store.close();
    }
  }, 60_000);
});
