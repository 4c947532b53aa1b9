import type { Kysely } from 'kysely';

import type { Database } from './schema.js';

/**
 * The names of the apps configured with keys on this database, now or before (docs/decisions/058): an identity
 * provider that accepts any app name (`*`) takes none of them, since what such an app created is owned by its name
 * (`app:<name>`) and stays after the app is removed from the configuration. Every replica records the names it is
 * configured with, at start and at each reload, and reads back every replica's: the table only grows.
 */
export async function recordKeyAppNames(
  db: Kysely<Database>,
  names: Iterable<string>,
  now: number,
): Promise<Set<string>> {
  const rows = [...new Set(names)].map((app) => ({ app, first_configured_at: now }));
  for (let i = 0; i < rows.length; i += 500) {
    await db
      .insertInto('key_app_names')
      .values(rows.slice(i, i + 500))
      .onConflict((oc) => oc.column('app').doNothing())
      .execute();
  }
  const all = await db.selectFrom('key_app_names').select('app').execute();
  return new Set(all.map((r) => r.app));
}
