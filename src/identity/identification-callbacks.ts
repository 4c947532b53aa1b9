import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';
import { callbackBodyDigest } from './callbacks.js';
import type { Database } from '../store/schema.js';

export interface IdentificationCallbackBinding {
  workflowId: string;
  /** Scope of the API key the address belongs to. */
  createdBy: string;
}

/**
 * Addresses one process remembers having written. The workflow id is the app's input, so the number of addresses
 * has no bound of its own; past this many, the oldest are forgotten, and issuing one of them again
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
 * key kept outside the database (`derive`), so the gateway can show the address again at any time, while
 * the database holds only the token's sha256 (a copy of it does not let anyone forge a callback).
 * See docs/decisions/018.
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
  ) {
    this.written = new LRUCache({ max: remember });
  }

  /** How many written addresses this process remembers now (never more than the bound it was given). */
  get remembered(): number {
    return this.written.size;
  }

  /** See callbackBodyDigest (callbacks.ts). */
  bodyDigest(body: unknown): string {
    return callbackBodyDigest(this.derive, body);
  }

  /** The token of the caller's address for a workflow, stored (as its hash) if it was not yet. */
  async issue(createdBy: string, workflowId: string): Promise<string> {
    const token = Buffer.from(this.derive(`identification-callback\u0000${createdBy}\u0000${workflowId}`), 'hex').toString('base64url');
    const hash = hashOf(token);
    if (!this.written.has(hash)) {
      await this.db
        .insertInto('identification_callbacks')
        .values({ token_hash: hash, workflow_id: workflowId, created_by: createdBy, created_at: Date.now() })
        .onConflict((oc) => oc.column('token_hash').doNothing())
        .execute();
      this.written.set(hash, true);
    }
    return token;
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
