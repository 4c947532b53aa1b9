import type { Kysely } from 'kysely';

import type { Database } from './schema.js';

/**
 * The names of the apps configured on this database, now or before (docs/decisions/058): the apps configured with
 * keys, and the names identity providers' entries list (bare, or `<claim value>=<name>`). An identity provider that
 * accepts any app name (`*`) takes none of them unless an entry lists it, since what such an app created is owned by
 * its name (`app:<name>`) and stays after the app is removed from the configuration. Every replica records the names
 * it is configured with, at start and at each reload, and reads back every replica's: the table only grows. The
 * table's name (`key_app_names`) is from when it held the key apps' names only.
 */
export async function recordAppNames(db: Kysely<Database>, names: Iterable<string>, now: number): Promise<Set<string>> {
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
