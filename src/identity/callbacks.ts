import type { Kysely } from 'kysely';
import { sha256 } from '../caller.js';
import { canonicalJson } from '../fingerprint.js';
import type { Database } from '../store/schema.js';

export interface CallbackBinding {
  /** The verification the token was issued for; null until the upstream's answer names it. */
  externalId: string | null;
  /** Scope of the caller that registered the verification: its events belong to that API key. */
  createdBy: string;
}

/**
 * The keyed digest of a callback body's canonical JSON (RFC 8785): two deliveries have the same one only when
 * they are the same body, whatever their key order or spacing. Only an exact repeat is a duplicate; every other
 * callback is kept (docs/decisions/041). Keyed, because the body holds personal data and its digest is stored.
 */
export function callbackBodyDigest(digest: (text: string) => string, body: unknown): string {
  return digest(`callback-body\u0000${canonicalJson(body) ?? 'null'}`);
}

function hashOf(token: string): string {
  return sha256(token).toString('hex');
}

/**
 * The random tokens of the callbackUrls the gateway hands out. Only their sha256 is stored, so a copy
 * of the database does not let anyone forge a callback.
 */
export class VerificationCallbacks {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly secret: { digest(text: string): string },
  ) {}

  /**
   * The token of the registration sent under `upstreamIdempotencyKey`, stored as its hash: a keyed digest
   * (256 bits, base64url) of that key, so it is unguessable without the gateway's secret, and the same on
   * every send of the same registration. A retry (the app's, after an unknown outcome or a failure, on any
   * replica, after a restart) then sends the same body under the same key, which an upstream that honours
   * the key replays instead of refusing as another request.
   */
  async issue(createdBy: string, externalId: string | null, upstreamIdempotencyKey: string): Promise<{ token: string; fresh: boolean }> {
    const token = Buffer.from(this.secret.digest(`verification-callback\u0000${upstreamIdempotencyKey}`), 'hex').toString('base64url');
    const inserted = await this.db
      .insertInto('verification_callbacks')
      .values({ token_hash: hashOf(token), external_id: externalId, created_by: createdBy, created_at: Date.now() })
      .onConflict((oc) => oc.column('token_hash').doNothing())
      .executeTakeFirst();
    return { token, fresh: Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1 };
  }

  /** Binds a token to the external id the upstream assigned (only if it had none). */
  async bind(token: string, externalId: string): Promise<void> {
    await this.db
      .updateTable('verification_callbacks')
      .set({ external_id: externalId })
      .where('token_hash', '=', hashOf(token))
      .where('external_id', 'is', null)
      .execute();
  }

  /** Forgets a token whose registration the upstream refused (nothing will call it). */
  async revoke(token: string): Promise<void> {
    await this.db.deleteFrom('verification_callbacks').where('token_hash', '=', hashOf(token)).execute();
  }

  /** See callbackBodyDigest. */
  bodyDigest(body: unknown): string {
    return callbackBodyDigest((text) => this.secret.digest(text), body);
  }

  async find(token: string): Promise<CallbackBinding | null> {
    const row = await this.db
      .selectFrom('verification_callbacks')
      .select(['external_id', 'created_by'])
      .where('token_hash', '=', hashOf(token))
      .executeTakeFirst();
    return row ? { externalId: row.external_id, createdBy: row.created_by } : null;
  }
}
