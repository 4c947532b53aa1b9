// Notifications whose bearer token was valid but whose id_token could not be verified when they arrived (the
// JWKS unreachable, a kid it does not have yet). The sender does not retry, so they are acknowledged and kept here,
// durably and sealed, and verified again on a bounded schedule; only a verified one reaches the event log and its
// subscribers (docs/decisions/040).
import type { Kysely } from 'kysely';
import type { Database } from '../store/schema.js';

/** First retry after this long, doubling per attempt up to PENDING_MAX_DELAY_MS. */
const PENDING_FIRST_DELAY_MS = 5_000;
const PENDING_MAX_DELAY_MS = 5 * 60_000;
/** How long a replica holds a row it is verifying; a replica that died lets it go after this. */
const LEASE_MS = 60_000;

export interface PendingNotification {
  /** The event log's dedupe key it will be stored under: one pending notification per owner and auth_req_id. */
  dedupeKey: string;
  authReqId: string;
  scope: string | null;
  fingerprint: string;
  payload: unknown;
  meta: Record<string, unknown>;
  secretsExpireAt: number | null;
  receivedAt: number;
  attempts: number;
  giveUpAt: number;
}

/** The delay before attempt `attempts + 1`: 5 s, 10 s, 20 s, … at most 5 minutes. */
function pendingDelay(attempts: number): number {
  return Math.min(PENDING_FIRST_DELAY_MS * 2 ** Math.min(attempts, 20), PENDING_MAX_DELAY_MS);
}

export class PendingVerifications {
  constructor(private readonly db: Kysely<Database>) {}

  /** Keeps a notification; when one is already pending under its dedupe key, returns that one's fingerprint. */
  async add(n: Omit<PendingNotification, 'attempts'>): Promise<{ added: true } | { added: false; fingerprint: string }> {
    const inserted = await this.db
      .insertInto('mobile_id_pending')
      .values({
        dedupe_key: n.dedupeKey,
        auth_req_id: n.authReqId,
        scope: n.scope,
        fingerprint: n.fingerprint,
        payload: JSON.stringify(n.payload),
        meta: JSON.stringify(n.meta),
        secrets_expire_at: n.secretsExpireAt,
        received_at: n.receivedAt,
        attempts: 0,
        next_attempt_at: n.receivedAt + pendingDelay(0),
        lease_until: 0,
        give_up_at: n.giveUpAt,
      })
      .onConflict((oc) => oc.column('dedupe_key').doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1) return { added: true };
    const existing = await this.fingerprintOf(n.dedupeKey);
    return existing === null ? this.add(n) : { added: false, fingerprint: existing };
  }

  async fingerprintOf(dedupeKey: string): Promise<string | null> {
    const row = await this.db.selectFrom('mobile_id_pending').select('fingerprint').where('dedupe_key', '=', dedupeKey).executeTakeFirst();
    return row?.fingerprint ?? null;
  }

  /**
   * The rows due at `now`, each taken for this replica with a conditional update: on PostgreSQL two replicas
   * never verify the same row at once (the event log's dedupe key would make a second delivery a duplicate
   * anyway).
   */
  async claimDue(now: number, limit = 100): Promise<PendingNotification[]> {
    const due = await this.db
      .selectFrom('mobile_id_pending')
      .selectAll()
      .where('next_attempt_at', '<=', now)
      .where('lease_until', '<', now)
      .orderBy('next_attempt_at')
      .limit(limit)
      .execute();
    const claimed: PendingNotification[] = [];
    for (const row of due) {
      const taken = await this.db
        .updateTable('mobile_id_pending')
        .set({ lease_until: now + LEASE_MS })
        .where('dedupe_key', '=', row.dedupe_key)
        .where('lease_until', '=', row.lease_until)
        .executeTakeFirst();
      if (Number(taken.numUpdatedRows) !== 1) continue;
      claimed.push({
        dedupeKey: row.dedupe_key,
        authReqId: row.auth_req_id,
        scope: row.scope,
        fingerprint: row.fingerprint,
        payload: JSON.parse(row.payload) as unknown,
        meta: JSON.parse(row.meta) as Record<string, unknown>,
        secretsExpireAt: row.secrets_expire_at === null ? null : Number(row.secrets_expire_at),
        receivedAt: Number(row.received_at),
        attempts: row.attempts,
        giveUpAt: Number(row.give_up_at),
      });
    }
    return claimed;
  }

  /** Still unverifiable: try again after the next delay, and let the lease go. */
  async reschedule(dedupeKey: string, attempts: number, now: number): Promise<void> {
    await this.db
      .updateTable('mobile_id_pending')
      .set({ attempts, next_attempt_at: now + pendingDelay(attempts), lease_until: 0 })
      .where('dedupe_key', '=', dedupeKey)
      .execute();
  }

  async remove(dedupeKey: string): Promise<void> {
    await this.db.deleteFrom('mobile_id_pending').where('dedupe_key', '=', dedupeKey).execute();
  }

  async count(): Promise<number> {
    const row = await this.db.selectFrom('mobile_id_pending').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }
}
