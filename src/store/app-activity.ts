import { sql, type Kysely } from 'kysely';

import type { Database } from './schema.js';

/** What `seen` records of a caller. */
interface Sighting {
  source: string;
  scopes: string;
  at: number;
}

/**
 * Most apps whose sightings wait for the next flush: configured apps are few, but JWT apps are whatever the
 * identity provider signs for; past the bound a sighting waits for the next one after the flush.
 */
const MAX_PENDING = 10_000;
/** Most rows the operator's list reads back. */
const MAX_LISTED = 10_000;
/**
 * The row of a JWT app's sightings is `jwt/<name>`: apart from the row of the app configured with keys under the same
 * name (AUTH_APPS `name=name`), so the operator sees which of the two was active, and with which scopes. `/` is in no
 * app name (APP_NAME), so the two keys never meet. Rows written before (a JWT app's under its bare name, source JWT)
 * are read as JWT sightings too.
 */
const JWT_ROW = 'jwt/';

/** When an app was last seen: by its keys, and by its JWTs with the scopes of the last one. */
interface AppSightings {
  readonly keys: ReadonlyMap<string, number>;
  readonly jwt: ReadonlyMap<string, { readonly scopes: string; readonly lastSeenAt: number }>;
}

/**
 * When each app was last seen (docs/decisions/046). The admit stage calls `seen` for every operation, which costs a
 * map write; every replica writes what it saw to `app_activity` now and then (`flush`), keeping the latest time.
 */
export class AppActivity {
  private pending = new Map<string, Sighting>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number = Date.now,
  ) {}

  seen(app: string, source: string, scopes: string): void {
    const row = source === 'JWT' ? JWT_ROW + app : app;
    if (this.pending.size >= MAX_PENDING && !this.pending.has(row)) return;
    this.pending.set(row, { source, scopes, at: this.now() });
  }

  /** Writes what was seen since the last flush, keeping for each app the latest time any replica saw it. */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const rows = [...this.pending].map(([app, s]) => ({ app, source: s.source, scopes: s.scopes, last_seen_at: s.at }));
    this.pending = new Map();
    // In the order of their keys, the same on every replica: on PostgreSQL the upsert locks its rows one by one, and
    // two replicas writing the same apps each in the order it saw them could each hold a row the other waits for.
    rows.sort((a, b) => (a.app < b.app ? -1 : a.app > b.app ? 1 : 0));
    for (let i = 0; i < rows.length; i += 500) {
      await this.db
        .insertInto('app_activity')
        .values(rows.slice(i, i + 500))
        .onConflict((oc) =>
          oc.column('app').doUpdateSet({
            source: sql`CASE WHEN excluded.last_seen_at >= app_activity.last_seen_at THEN excluded.source ELSE app_activity.source END`,
            scopes: sql`CASE WHEN excluded.last_seen_at >= app_activity.last_seen_at THEN excluded.scopes ELSE app_activity.scopes END`,
            last_seen_at: sql`CASE WHEN excluded.last_seen_at >= app_activity.last_seen_at THEN excluded.last_seen_at ELSE app_activity.last_seen_at END`,
          }),
        )
        .execute();
    }
  }

  /** Every app seen, by name: by its keys, and by its JWTs (after a flush of this replica's sightings). */
  async all(): Promise<AppSightings> {
    await this.flush();
    const rows = await this.db
      .selectFrom('app_activity')
      .select(['app', 'source', 'scopes', 'last_seen_at'])
      .orderBy('app')
      .limit(MAX_LISTED)
      .execute();
    const keys = new Map<string, number>();
    const jwt = new Map<string, { scopes: string; lastSeenAt: number }>();
    for (const r of rows) {
      const at = Number(r.last_seen_at);
      if (r.app.startsWith(JWT_ROW) || r.source === 'JWT') {
        const name = r.app.startsWith(JWT_ROW) ? r.app.slice(JWT_ROW.length) : r.app;
        const known = jwt.get(name);
        if (!known || known.lastSeenAt < at) jwt.set(name, { scopes: r.scopes, lastSeenAt: at });
      } else {
        keys.set(r.app, at);
      }
    }
    return { keys, jwt };
  }
}
