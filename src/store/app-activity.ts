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
    if (this.pending.size >= MAX_PENDING && !this.pending.has(app)) return;
    this.pending.set(app, { source, scopes, at: this.now() });
  }

  /** Writes what was seen since the last flush, keeping for each app the latest time any replica saw it. */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const rows = [...this.pending].map(([app, s]) => ({ app, source: s.source, scopes: s.scopes, last_seen_at: s.at }));
    this.pending = new Map();
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

  /** Every app seen, by name (after a flush of this replica's sightings). */
  async all(): Promise<Map<string, { source: string; scopes: string; lastSeenAt: number }>> {
    await this.flush();
    const rows = await this.db.selectFrom('app_activity').select(['app', 'source', 'scopes', 'last_seen_at']).orderBy('app').limit(MAX_LISTED).execute();
    return new Map(rows.map((r) => [r.app, { source: r.source, scopes: r.scopes, lastSeenAt: Number(r.last_seen_at) }]));
  }
}
