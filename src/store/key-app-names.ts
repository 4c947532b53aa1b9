import type { Kysely } from 'kysely';

import type { Database } from './schema.js';

/** What a start or a reload recorded: every app name configured on the database, or why nothing was recorded. */
export type RecordedNames =
  | { readonly names: ReadonlySet<string>; readonly taken?: undefined }
  /** Key apps whose names an identity provider that accepts any app name (`*`) accepted before. */
  | { readonly taken: readonly string[] };

/**
 * The names of the apps configured on this database, now or before (docs/decisions/058): the apps configured with
 * keys, and the names identity providers' entries list (bare, or `<claim value>=<name>`). An identity provider that
 * accepts any app name (`*`) takes none of them unless an entry lists it, since what such an app created is owned by
 * its name (`app:<name>`) and stays after the app is removed from the configuration. Every replica records the names
 * it is configured with, at start and at each reload, and reads back every replica's: the table only grows. The
 * table's name (`key_app_names`) is from when it held the key apps' names only.
 *
 * The other way round, `keyApps` (the key apps' names, less those an entry makes one app with a JWT app: `name=name`)
 * may not be names `*` accepted before (`wildcard_app_names`, AcceptedNames): those are answered as `taken`. They are
 * looked up before anything is written, so that a refused configuration records nothing, and again after the names
 * are written: a replica whose `*` accepts such a name for the first time meanwhile writes it before it looks for the
 * configured names (AcceptedNames.record), so one of the two sees the other's.
 *
 * `merged`: key apps an entry makes one app with the JWT app of their name (`shop=shop`). Their names are no longer
 * `*`'s once recorded as configured: the operator said the two are one app, so a later configuration that keeps the
 * key app without the entry (the app moved from JWTs to keys) starts, and `*` never takes the name again (it is
 * configured).
 */
export async function recordAppNames(
  db: Kysely<Database>,
  names: Iterable<string>,
  now: number,
  keyApps: readonly string[] = [],
  merged: readonly string[] = [],
): Promise<RecordedNames> {
  const before = await acceptedAmong(db, keyApps);
  if (before.length > 0) return { taken: before };
  for (const batch of batchesOf(names))
    await db
      .insertInto('key_app_names')
      .values(batch.map((app) => ({ app, first_configured_at: now })))
      .onConflict((oc) => oc.column('app').doNothing())
      .execute();
  const after = await acceptedAmong(db, keyApps);
  if (after.length > 0) return { taken: after };
  for (const batch of batchesOf(merged)) await db.deleteFrom('wildcard_app_names').where('app', 'in', batch).execute();
  const all = await db.selectFrom('key_app_names').select('app').execute();
  return { names: new Set(all.map((r) => r.app)) };
}

/** The names of `apps` that `*` accepted before, sorted. */
async function acceptedAmong(db: Kysely<Database>, apps: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const batch of batchesOf(apps)) {
    const rows = await db.selectFrom('wildcard_app_names').select('app').where('app', 'in', batch).execute();
    found.push(...rows.map((r) => r.app));
  }
  return found.sort();
}

/** Distinct names in statements of at most 500 (a bound on each statement's parameters, on either database). */
function batchesOf(names: Iterable<string>): string[][] {
  const unique = [...new Set(names)];
  const batches: string[][] = [];
  for (let i = 0; i < unique.length; i += 500) batches.push(unique.slice(i, i + 500));
  return batches;
}

/**
 * The names an identity provider that accepts any app name (`*`) accepted, recorded in the database before the first
 * request under each is served, so that no key app configured later takes that name (recordAppNames): its data is
 * owned by the name. Each name costs one insert (`on conflict do nothing`: replicas may accept it at once) and one
 * read per process, the first time; after that it is a lookup in memory, and requests under one name that arrive
 * together wait for the same write. A name configured on the database since this replica last read the configured
 * names (another replica's key app, or entry) is refused, and nothing is written for it.
 */
export class AcceptedNames {
  private readonly recorded = new Set<string>();
  private readonly configured = new Set<string>();
  private readonly recording = new Map<string, Promise<boolean>>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number,
  ) {}

  /** True once `name` is recorded as `*`'s; false when it is a name configured on the database (refused). */
  accept(name: string): boolean | Promise<boolean> {
    if (this.recorded.has(name)) return true;
    if (this.configured.has(name)) return false;
    let pending = this.recording.get(name);
    if (pending === undefined) {
      pending = this.record(name).finally(() => this.recording.delete(name));
      this.recording.set(name, pending);
    }
    return pending;
  }

  private async record(name: string): Promise<boolean> {
    if (await this.isConfigured(name)) return false;
    await this.db
      .insertInto('wildcard_app_names')
      .values({ app: name, first_accepted_at: this.now() })
      .onConflict((oc) => oc.column('app').doNothing())
      .execute();
    // Looked up again once written: a reload elsewhere that configured the name meanwhile, and did not see this
    // write, wrote the name before it looked (recordAppNames).
    if (await this.isConfigured(name)) return false;
    this.recorded.add(name);
    return true;
  }

  private async isConfigured(name: string): Promise<boolean> {
    const row = await this.db.selectFrom('key_app_names').select('app').where('app', '=', name).executeTakeFirst();
    if (row === undefined) return false;
    this.configured.add(name);
    return true;
  }
}
