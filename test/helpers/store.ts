import { sql } from 'kysely';

import type { TestGateway } from './gateway.js';

const TABLES = [
  'idempotency_records',
  'resources',
  'events',
  'notification_tokens',
  'verification_callbacks',
  'provisionings',
] as const;

/**
 * Every row of the tables that hold what the gateway created or received (store and event log), as sorted JSON text
 * per table: two snapshots are equal exactly when a request changed none of it. Not compared, on purpose: the
 * quarantine of refused mobile-ID notifications (mobile_id_rejections, where a refusal is recorded by design) and
 * rate-limit counters.
 */
export async function storeSnapshot(
  gw: TestGateway,
  options: { expiringBefore?: number } = {},
): Promise<Record<string, string[]>> {
  const db = gw.gateway.services.store.db;
  const snapshot: Record<string, string[]> = {};
  for (const table of TABLES) {
    const rows = await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(db);
    // With `expiringBefore`, rows that expire before then are left out: the gateway's periodic purge may remove them
    // at any moment, which is not a change a request made.
    const live =
      options.expiringBefore === undefined
        ? rows.rows
        : rows.rows.filter((r) => r.expires_at == null || Number(r.expires_at) > options.expiringBefore!);
    snapshot[table] = live
      .map((r) =>
        JSON.stringify(r, (_k, v) =>
          Buffer.isBuffer(v) ? v.toString('base64') : typeof v === 'bigint' ? String(v) : v,
        ),
      )
      .sort();
  }
  return snapshot;
}

/** Number of rows per table. */
export async function storeCounts(gw: TestGateway): Promise<Record<string, number>> {
  const snapshot = await storeSnapshot(gw);
  return Object.fromEntries(Object.entries(snapshot).map(([t, rows]) => [t, rows.length]));
}

/** A sealed value (`ctr1.` or `gcm1.<keyId>.<iv>.<ciphertext>.<tag>`), matched whole inside JSON text. */
const SEALED = /(?:ctr1|gcm1)\.[0-9a-f]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+/g;

/**
 * Rows as JSON text with every sealed value replaced by `<sealed>`: what a reader of the database sees in clear. A
 * check that a short clear value ("Ada") is absent must look here, not at the sealed text, where random base64url
 * contains any three letters now and then.
 */
export function clearTextOf(rows: unknown): string {
  return JSON.stringify(rows).replace(SEALED, '<sealed>');
}
