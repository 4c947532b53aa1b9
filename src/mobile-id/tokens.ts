import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';

import { indexOfDigest, sha256, type Caller } from '../auth/caller.js';
import { badUserInput } from '../errors.js';
import type { AppStorage } from '../store/app-storage.js';
import type { Database } from '../store/schema.js';
import { checkAuthReqId } from './stored.js';

/** Who sent a notification, as its `Authorization: Bearer <client_notification_token>` tells. */
const NOT_VALID = 'the client_notification_token is not valid or has expired';

export type NotifierAuth =
  | {
      ok: true;
      /** `configured` (MOBILEID_NOTIFICATION_TOKENS, or the sandbox token) or `issued` (issueMobileIdNotificationToken). */
      source: 'configured' | 'issued';
      /** The only auth_req_id the token is good for, when it was issued for one. */
      authReqId: string | null;
      /**
       * The owner of what the token carries: the app that issued it, or the app a configured token is bound to
       * (`<app>:<token>`); null for a configured token shared by every app.
       */
      scope: string | null;
    }
  | {
      ok: false;
      description: string;
      /**
       * An issued token that has expired: the app that issued it and the auth_req_id it was for, so that the refusal is
       * kept as that app's (a late notification of a real authentication), not with outsiders' noise. The answer
       * (401, the same description) does not tell it from an unknown token.
       */
      expired?: { scope: string; authReqId: string | null };
    };

export interface IssuedToken {
  token: string;
  authReqId: string | null;
  expiresAt: Date;
}

const TOKEN_TTL = { defaultSeconds: 3600, minSeconds: 10, maxSeconds: 7 * 86_400 } as const;

/**
 * The client_notification_tokens the webhook accepts: the configured ones (held as sha256 digests and
 * compared in constant time) and the ones the gateway issued (only their sha256 is stored).
 */
export class NotificationTokens {
  private readonly configured: Buffer[];
  private readonly configuredScopes: (string | null)[];

  constructor(
    private readonly db: Kysely<Database>,
    configured: readonly { token: string; scope: string | null }[],
    /** Each app's live issued tokens are bounded, per minute and in all (APP_NOTIFICATION_TOKENS*); null: no bound. */
    private readonly storage: AppStorage | null = null,
  ) {
    this.configured = configured.map((c) => sha256(c.token));
    this.configuredScopes = configured.map((c) => c.scope);
  }

  /** issueMobileIdNotificationToken: its arguments checked (BAD_USER_INPUT), then a token issued. */
  async issueChecked(
    caller: Caller,
    options: { authReqId?: string | null; ttlSeconds?: number | null },
    now = Date.now(),
  ): Promise<IssuedToken> {
    const authReqId = options.authReqId ?? null;
    if (authReqId !== null) checkAuthReqId(authReqId);
    const ttl = options.ttlSeconds ?? TOKEN_TTL.defaultSeconds;
    if (!Number.isInteger(ttl) || ttl < TOKEN_TTL.minSeconds || ttl > TOKEN_TTL.maxSeconds) {
      throw badUserInput('ttlSeconds', `must be from ${TOKEN_TTL.minSeconds} to ${TOKEN_TTL.maxSeconds}`);
    }
    return this.issue(caller, { authReqId, ttlMs: ttl * 1000 }, now);
  }

  async issue(
    caller: Caller,
    options: { authReqId: string | null; ttlMs: number },
    now = Date.now(),
  ): Promise<IssuedToken> {
    const refusal = this.storage?.take('notification-tokens', caller.scope, 0, now) ?? null;
    if (refusal) throw this.storage!.refused(refusal);
    const token = randomBytes(32).toString('base64url');
    const expiresAt = now + options.ttlMs;
    try {
      await this.db
        .insertInto('notification_tokens')
        .values({
          token_hash: sha256(token).toString('hex'),
          auth_req_id: options.authReqId,
          created_by: caller.scope,
          created_at: now,
          expires_at: expiresAt,
        })
        .execute();
    } catch (err) {
      this.storage?.release('notification-tokens', caller.scope, 1, 0, now);
      throw err;
    }
    return { token, authReqId: options.authReqId, expiresAt: new Date(expiresAt) };
  }

  /** Who sent a notification: at once for a missing or configured token, after a lookup for an issued one. */
  check(token: string | null, now = Date.now()): NotifierAuth | Promise<NotifierAuth> {
    if (!token) return { ok: false, description: 'send Authorization: Bearer <client_notification_token>' };
    const configured = this.configured.length ? indexOfDigest(sha256(token), this.configured) : -1;
    if (configured >= 0)
      return { ok: true, source: 'configured', authReqId: null, scope: this.configuredScopes[configured]! };
    return this.checkIssued(token, now);
  }

  private async checkIssued(token: string, now: number): Promise<NotifierAuth> {
    // Looked up by its sha256: the timing of an index lookup tells nothing usable about the token itself.
    const row = await this.db
      .selectFrom('notification_tokens')
      .select(['auth_req_id', 'created_by', 'expires_at'])
      .where('token_hash', '=', sha256(token).toString('hex'))
      .executeTakeFirst();
    if (!row) return { ok: false, description: NOT_VALID };
    if (Number(row.expires_at) <= now)
      return { ok: false, description: NOT_VALID, expired: { scope: row.created_by, authReqId: row.auth_req_id } };
    return { ok: true, source: 'issued', authReqId: row.auth_req_id, scope: row.created_by };
  }

  async purgeExpired(now = Date.now()): Promise<number> {
    if (this.storage) {
      const expired = await this.db
        .selectFrom('notification_tokens')
        .select(['created_by', (eb) => eb.fn.countAll<number>().as('n')])
        .where('expires_at', '<=', now)
        .groupBy('created_by')
        .execute();
      for (const e of expired) this.storage.release('notification-tokens', e.created_by, Number(e.n));
    }
    const res = await this.db.deleteFrom('notification_tokens').where('expires_at', '<=', now).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
