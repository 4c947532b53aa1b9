// Notifications whose bearer token was valid but whose id_token could not be verified when they arrived (the
// JWKS unreachable, a kid it does not have yet). The sender does not retry, so they are acknowledged and kept here,
// durably and sealed, and verified again on a bounded schedule; only a verified one reaches the event log and its
// subscribers (docs/decisions/040). Each owner's rows are bounded, and each pass is shared across owners, so that
// one owner's backlog cannot hold up another's results (docs/decisions/052).
import { sql, type Kysely } from 'kysely';

import type { StorageCharge } from '../events/index.js';
import type { StorageRefusal } from '../store/app-storage.js';
import type { Database } from '../store/schema.js';

/** First retry after this long, doubling per attempt up to PENDING_MAX_DELAY_MS. */
const PENDING_FIRST_DELAY_MS = 5_000;
const PENDING_MAX_DELAY_MS = 5 * 60_000;
/** How long a replica holds a row it is verifying; a replica that died lets it go after this. */
const LEASE_MS = 60_000;
/** Most rows one pass verifies; also the most owners one pass visits (each gets at least one row). */
export const PASS_ROWS = 100;

/** The owner of a row in the per-owner counts: its scope, or '' for a shared configured token (a null scope). */
function ownerKey(scope: string | null): string {
  return scope ?? '';
}

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
  /** Characters of its stored JSON (payload and meta), as its owner's storage bound counted them. */
  chars: number;
}

/** The delay before attempt `attempts + 1`: 5 s, 10 s, 20 s, … at most 5 minutes. */
function pendingDelay(attempts: number): number {
  return Math.min(PENDING_FIRST_DELAY_MS * 2 ** Math.min(attempts, 20), PENDING_MAX_DELAY_MS);
}

export class PendingVerifications {
  /** The owner after which the next pass starts, when the last one could not visit every owner; null: from the first. */
  private cursor: string | null = null;

  /** `maxPerOwner`: MOBILEID_PENDING_MAX_PER_APP, the most rows one owner may have pending. */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly maxPerOwner: number,
  ) {}

  /**
   * Keeps a notification, unless its owner already has `maxPerOwner` pending (`over-limit`: nothing stored); when one
   * is already pending under its dedupe key, returns that one's fingerprint (a repeat is recognised over the limit too).
   * The limit is checked by the insert itself against the owner's count (one indexed lookup, kept by triggers). With
   * `charge`, it first counts against its owner's storage bound (src/store/app-storage.ts), and past it is not kept.
   */
  async add(
    n: Omit<PendingNotification, 'attempts' | 'chars'>,
    charge: StorageCharge | null = null,
  ): Promise<
    | { added: true }
    | { added: false; fingerprint: string }
    | { added: false; overLimit: true }
    | { added: false; refused: StorageRefusal }
  > {
    const owner = ownerKey(n.scope);
    const payload = JSON.stringify(n.payload);
    const meta = JSON.stringify(n.meta);
    const chars = payload.length + meta.length;
    const refusal = charge?.take(chars) ?? null;
    if (refusal) {
      const existing = await this.fingerprintOf(n.dedupeKey);
      if (existing !== null) return { added: false, fingerprint: existing };
      charge!.refused(refusal);
      return { added: false, refused: refusal };
    }
    // One statement: on SQLite the count it reads cannot change before the row is in. On PostgreSQL, notifications of
    // one owner inserted at the same instant on several connections may each read the count before the others' rows.
    const inserted = await sql`INSERT INTO mobile_id_pending
        (dedupe_key, auth_req_id, scope, fingerprint, payload, meta, secrets_expire_at, received_at, attempts, next_attempt_at, lease_until, give_up_at)
      SELECT CAST(${n.dedupeKey} AS text), CAST(${n.authReqId} AS text), CAST(${n.scope} AS text), CAST(${n.fingerprint} AS text),
        CAST(${payload} AS text), CAST(${meta} AS text), CAST(${n.secretsExpireAt} AS bigint),
        CAST(${n.receivedAt} AS bigint), 0, CAST(${n.receivedAt + pendingDelay(0)} AS bigint), CAST(0 AS bigint), CAST(${n.giveUpAt} AS bigint)
      WHERE COALESCE((SELECT pending FROM mobile_id_pending_owners WHERE owner = ${owner}), 0) < ${this.maxPerOwner}
      ON CONFLICT (dedupe_key) DO NOTHING`
      .execute(this.db)
      .catch((err: unknown) => {
        // Not kept (the store failed): what was counted against its owner's bound is given back.
        charge?.refund(chars);
        throw err;
      });
    if (Number(inserted.numAffectedRows ?? 0n) === 1) return { added: true };
    charge?.refund(chars);
    const existing = await this.fingerprintOf(n.dedupeKey);
    if (existing !== null) return { added: false, fingerprint: existing };
    if ((await this.pendingOf(owner)) >= this.maxPerOwner) return { added: false, overLimit: true };
    // The row it collided with was verified or refused meanwhile: try again.
    return this.add(n, charge);
  }

  async fingerprintOf(dedupeKey: string): Promise<string | null> {
    const row = await this.db
      .selectFrom('mobile_id_pending')
      .select('fingerprint')
      .where('dedupe_key', '=', dedupeKey)
      .executeTakeFirst();
    return row?.fingerprint ?? null;
  }

  private async pendingOf(owner: string): Promise<number> {
    const row = await this.db
      .selectFrom('mobile_id_pending_owners')
      .select('pending')
      .where('owner', '=', owner)
      .executeTakeFirst();
    return Number(row?.pending ?? 0);
  }

  /**
   * The rows of one pass, due at `now`, shared across owners: each owner with pending rows (at most `limit` of them,
   * the next ones first when there are more) gets an equal share of `limit`, its earliest due rows, read through the
   * (scope, next_attempt_at) index; the rows come back round-robin (every owner's first, then every owner's second,
   * ...). So another owner's backlog takes at most its share of a pass, and an owner's earliest due row is taken in
   * the first pass at which it is due whenever at most `limit` owners have rows pending.
   *
   * Each row is taken for this replica with a conditional update: on PostgreSQL two replicas never verify the same
   * row at once (the event log's dedupe key would make a second delivery a duplicate anyway).
   */
  async claimDue(now: number, limit = PASS_ROWS): Promise<PendingNotification[]> {
    const owners = await this.ownersToVisit(limit);
    if (owners.length === 0) return [];
    const share = Math.max(1, Math.floor(limit / owners.length));
    const ofOwner = (owner: string) => {
      const q = this.db
        .selectFrom('mobile_id_pending')
        .selectAll()
        .where('next_attempt_at', '<=', now)
        .where('lease_until', '<', now)
        .orderBy('next_attempt_at')
        .limit(share);
      return owner === '' ? q.where('scope', 'is', null) : q.where('scope', '=', owner);
    };
    // One statement for every owner: a UNION ALL of each owner's indexed range.
    let query = this.db.selectFrom(ofOwner(owners[0]!).as('o')).selectAll();
    for (const owner of owners.slice(1)) query = query.unionAll(this.db.selectFrom(ofOwner(owner).as('o')).selectAll());
    const rows = await query.execute();

    const byOwner = new Map<string, typeof rows>();
    for (const row of rows) {
      const key = ownerKey(row.scope);
      const list = byOwner.get(key);
      if (list) list.push(row);
      else byOwner.set(key, [row]);
    }
    const due: typeof rows = [];
    for (let rank = 0; due.length < rows.length; rank++) {
      for (const list of byOwner.values()) if (rank < list.length) due.push(list[rank]!);
    }

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
        chars: row.payload.length + row.meta.length,
      });
    }
    return claimed;
  }

  /** The owners with rows pending that this pass visits: all of them, or `limit` at a time in turn when there are more. */
  private async ownersToVisit(limit: number): Promise<string[]> {
    const from = (after: string | null, upTo: string | null, n: number) => {
      let q = this.db
        .selectFrom('mobile_id_pending_owners')
        .select('owner')
        .where('pending', '>', 0)
        .orderBy('owner')
        .limit(n);
      if (after !== null) q = q.where('owner', '>', after);
      if (upTo !== null) q = q.where('owner', '<=', upTo);
      return q.execute();
    };
    const owners = (await from(this.cursor, null, limit)).map((r) => r.owner);
    if (owners.length < limit && this.cursor !== null)
      owners.push(...(await from(null, this.cursor, limit - owners.length)).map((r) => r.owner));
    this.cursor = owners.length === limit ? owners[owners.length - 1]! : null;
    return owners;
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

  /** Every owner's pending rows, from the per-owner counts (no count over the rows). */
  async count(): Promise<number> {
    const row = await this.db
      .selectFrom('mobile_id_pending_owners')
      .select((eb) => eb.fn.sum<number | string | null>('pending').as('n'))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** Forgets the owners that have nothing pending any more. */
  async purgeOwners(): Promise<number> {
    const res = await this.db.deleteFrom('mobile_id_pending_owners').where('pending', '=', 0).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
