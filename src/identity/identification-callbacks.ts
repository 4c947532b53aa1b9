import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';

import type { AppStorage } from '../store/app-storage.js';
import { callInFlight } from '../store/idempotency.js';
import type { Database } from '../store/schema.js';

export interface IdentificationCallbackBinding {
  workflowId: string;
  /** Scope of the API key the address belongs to. */
  createdBy: string;
}

/**
 * Addresses one process remembers having written. Each app's addresses are bounded (APP_CALLBACK_ADDRESSES), but
 * there may be many apps; past this many, the oldest are forgotten, and issuing one of them again
 * costs one `insert … on conflict do nothing` (the row is still there). 10,000 entries of a 64-character hash.
 */
export const REMEMBERED_ADDRESSES = 10_000;

function hashOf(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * The addresses of identification completion callbacks (spec: Events 2). The platform calls back per
 * workflow, configured on its side, so the gateway cannot hand out an address per request as it does for
 * verifications: there is one address per (API key, workflow). Its token is an HMAC of the two under a
 * key kept outside the database (`derive`), so the gateway can show the address at any time without storing
 * anything (`address`: a query only reads). The row that lets a callback in is written when the app creates an
 * identification of the workflow (`issue`), the first moment a callback can come; it holds only the token's sha256
 * (a copy of it does not let anyone forge a callback). See docs/decisions/018 and 051.
 */
export class IdentificationCallbacks {
  /** Addresses this process has already written, so that creating links costs no extra statement. */
  private readonly written: LRUCache<string, true>;

  constructor(
    private readonly db: Kysely<Database>,
    /** A keyed digest (hex) of its input; the same key on every replica gives the same addresses. */
    private readonly derive: (text: string) => string,
    /** How many written addresses are remembered (REMEMBERED_ADDRESSES). */
    remember = REMEMBERED_ADDRESSES,
    /** Each app's addresses are bounded, per minute and in all (APP_CALLBACK_ADDRESSES*); null: no bound. */
    private readonly storage: AppStorage | null = null,
    /**
     * The gateway's clock (GatewayTesting.clock): the minutes of the per-minute bound of addresses, and the leases of
     * creations in flight (written on it by the idempotency records).
     */
    private readonly now: () => number = () => Date.now(),
  ) {
    this.written = new LRUCache({ max: remember });
  }

  /** How many written addresses this process remembers now (never more than the bound it was given). */
  get remembered(): number {
    return this.written.size;
  }

  /** The token of the caller's address for a workflow, derived: nothing is read or written. */
  address(createdBy: string, workflowId: string): string {
    return Buffer.from(this.derive(`identification-callback\u0000${createdBy}\u0000${workflowId}`), 'hex').toString(
      'base64url',
    );
  }

  /**
   * The token of the caller's address for a workflow, stored (as its hash) if it was not yet, within the app's bound
   * of addresses (StorageBoundError past it, nothing written).
   */
  async issue(createdBy: string, workflowId: string): Promise<string> {
    const token = this.address(createdBy, workflowId);
    const hash = hashOf(token);
    if (!this.written.has(hash)) {
      const known = this.storage ? await this.find(token) : null;
      if (!known) {
        const takenAt = this.now();
        const refusal = this.storage?.take('callback-addresses', createdBy, 0, takenAt) ?? null;
        if (refusal) throw this.storage!.refused(refusal);
        const inserted = await this.db
          .insertInto('identification_callbacks')
          .values({ token_hash: hash, workflow_id: workflowId, created_by: createdBy, created_at: takenAt })
          .onConflict((oc) => oc.column('token_hash').doNothing())
          .executeTakeFirst()
          .catch((err: unknown) => {
            this.storage?.release('callback-addresses', createdBy, 1, 0, takenAt);
            throw err;
          });
        // Another replica wrote it meanwhile: it was counted there.
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) !== 1)
          this.storage?.release('callback-addresses', createdBy, 1, 0, takenAt);
      }
      this.written.set(hash, true);
    }
    return token;
  }

  /**
   * True while an identification creation of the app is in flight (its idempotency record pending, its lease
   * running): the platform may have answered it and be calling back before its record is stored.
   */
  creating(createdBy: string, now = this.now()): Promise<boolean> {
    return callInFlight(this.db, createdBy, 'createIdentification', now);
  }

  async find(token: string): Promise<IdentificationCallbackBinding | null> {
    const row = await this.db
      .selectFrom('identification_callbacks')
      .select(['workflow_id', 'created_by'])
      .where('token_hash', '=', hashOf(token))
      .executeTakeFirst();
    return row ? { workflowId: row.workflow_id, createdBy: row.created_by } : null;
  }
}
