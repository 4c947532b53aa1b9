// The quarantine of refused mobile-ID notifications. The sender does not retry ("Retry policy ... of the
// notification delivery: not shown"), so a refused notification is a lost authentication: operators must be
// able to explain it. Kept without secrets: when, why, the auth_req_id and the sender's support references,
// never the body or a token (docs/decisions/016-id-token-checks-and-quarantine.md).
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';

import type { Caller } from '../auth/caller.js';
import type { Database } from '../store/schema.js';
import { checkAuthReqId } from './stored.js';
import type { IdTokenRejection } from './verify.js';
import { MAX_ID_LENGTH } from './wire.js';

/** Most refused notifications one read returns (a larger page size is clamped to it). */
export const MAX_REJECTIONS_PAGE = 500;

/** Why a notification was refused; one value per kind of refusal (also the metric's `reason` label). */
export type RejectionReason =
  /** 401: no, a wrong or an expired client_notification_token, or one issued for another auth_req_id. */
  | 'UNAUTHORIZED'
  /** 415: neither JSON nor form-encoded, or a Content-Encoding. */
  | 'UNSUPPORTED_MEDIA_TYPE'
  /** 413: over the body limit. */
  | 'BODY_TOO_LARGE'
  /** 400: not JSON, or a field missing or wrong, or an id_token that is not a JWT with a sub. */
  | 'MALFORMED'
  | IdTokenRejection
  /** 409: another notification was already stored for the auth_req_id. */
  | 'CONFLICT'
  /** Acknowledged (204) pending verification, and the JWKS still could not be loaded at EVENT_RETENTION. */
  | 'JWKS_UNAVAILABLE'
  /** 429: not verifiable now, and its owner already had MOBILEID_PENDING_MAX_PER_APP notifications pending. */
  | 'PENDING_LIMIT'
  /** 429: the app whose token carried it has reached a storage bound (src/store/app-storage.ts); nothing stored. */
  | 'STORAGE_BOUND';

export interface Rejection {
  id: string;
  receivedAt: Date;
  /** Null when the body was not read (401, 413, 415) or had no usable auth_req_id. */
  authReqId: string | null;
  httpStatus: number;
  /** The `error` of the answer (invalid_request, invalid_token, temporarily_unavailable). */
  error: string;
  reason: RejectionReason;
  /** The `error_description` of the answer: names what is wrong, never a value. */
  description: string;
  requestId: string | null;
  transactionId: string | null;
  gatewayRequestId: string;
}

export type NewRejection = Omit<Rejection, 'id' | 'receivedAt'> & {
  /** The API-key scope of the app whose issued token authenticated the notification; null otherwise. */
  scope: string | null;
};

/**
 * Most rows kept of the operator's view (refusals on configured tokens, or before any token was recognised): a
 * flood of forged requests cannot grow the table without bound.
 */
const QUARANTINE_MAX_ROWS = 10_000;
/**
 * Most rows kept per app (refusals of notifications on a token that app issued), apart from the operator's view
 * and from every other app: an app that posts 10,000 malformed notifications on its own token pushes out only its
 * own rows.
 */
const QUARANTINE_MAX_ROWS_PER_APP = 1_000;
/**
 * Most rows per minute (per process) for requests refused before their body was read (no or a wrong
 * client_notification_token): anyone can send those, and each row is a durable write. Past it they are only
 * counted (metric, log). A real sender with a wrong token shows up well within it.
 */
const UNAUTHENTICATED_ROWS_PER_MINUTE = 100;
/**
 * The owner column of a refusal that came with no valid token and named no auth_req_id: outsiders' noise, kept in a
 * bucket of its own (its own per-minute cap above, its own row bound below), so that junk bearer tokens neither use up
 * a budget of nor push out the refusals that came on configured tokens or named an auth_req_id (the operator's view,
 * owner null) or on an app's tokens. No caller's scope is this value (scopes are `open`, `app:…` or `key:…`), so only
 * an operator reads these rows. Rows of this kind written before it existed have owner null and age out as before.
 */
const OUTSIDERS = 'outsiders';
/** Most rows kept of outsiders' noise. */
const QUARANTINE_MAX_OUTSIDER_ROWS = 1_000;
const MAX_DESCRIPTION = 1000;

/** The auth_req_id of a refused body, when it has a usable one (a string the schema would accept). */
export function authReqIdOf(body: unknown): string | null {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return null;
  const v = (body as Record<string, unknown>).auth_req_id;
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_ID_LENGTH ? v : null;
}

/** Operators read every rejection; an app reads those of notifications that came with a token it issued. */
function isOperator(caller: Caller): boolean {
  return caller.grants.has('operator');
}

let sequence = 0;

/** Ids that sort in the order rows were written (time, then a per-process counter), unique across replicas. */
function rowId(now: number): string {
  sequence = (sequence + 1) % 1_000_000;
  return `${String(now).padStart(15, '0')}-${String(sequence).padStart(6, '0')}-${randomBytes(4).toString('hex')}`;
}

export class RejectionQuarantine {
  private window = { start: 0, count: 0 };

  constructor(
    private readonly db: Kysely<Database>,
    private readonly retentionMs: number,
    /**
     * The gateway's clock (GatewayTesting.clock): a refusal's reception time, which the purge compares with the
     * retention on it, and the minutes of the cap on unauthenticated refusals.
     */
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Keeps one refusal; false when it was only counted (an unauthenticated one past the per-minute cap). */
  async record(r: NewRejection, now = this.now()): Promise<boolean> {
    const outsider = r.reason === 'UNAUTHORIZED' && r.authReqId === null && r.scope === null;
    if (outsider) {
      if (now - this.window.start >= 60_000) this.window = { start: now, count: 0 };
      if (++this.window.count > UNAUTHENTICATED_ROWS_PER_MINUTE) return false;
    }
    await this.db
      .insertInto('mobile_id_rejections')
      .values({
        id: rowId(now),
        received_at: now,
        auth_req_id: r.authReqId,
        http_status: r.httpStatus,
        error: r.error,
        reason: r.reason,
        description: r.description.slice(0, MAX_DESCRIPTION),
        request_id: r.requestId,
        transaction_id: r.transactionId,
        gateway_request_id: r.gatewayRequestId,
        scope: outsider ? OUTSIDERS : r.scope,
      })
      .execute();
    return true;
  }

  /**
   * Refused notifications, newest first (at most `first`, 1 to MAX_REJECTIONS_PAGE: mobileIdRejections' page size):
   * all of them for an operator, those on tokens it issued for an app.
   */
  list(caller: Caller, options: { first: number; authReqId?: string | null }): Promise<Rejection[]> {
    if (options.authReqId != null) checkAuthReqId(options.authReqId);
    return this.rows(caller, Math.max(1, Math.min(options.first, MAX_REJECTIONS_PAGE)), options.authReqId ?? null);
  }

  private async rows(caller: Caller, first: number, authReqId: string | null): Promise<Rejection[]> {
    let q = this.db.selectFrom('mobile_id_rejections').selectAll().orderBy('id', 'desc').limit(first);
    // Not readableBy (src/auth/tenancy.ts): the operator reads every row, an app its own only, none of the null ones.
    if (!isOperator(caller)) q = q.where('scope', '=', caller.scope);
    if (authReqId !== null) q = q.where('auth_req_id', '=', authReqId);
    const rows = await q.execute();
    return rows.map((row) => ({
      id: row.id,
      receivedAt: new Date(Number(row.received_at)),
      authReqId: row.auth_req_id,
      httpStatus: Number(row.http_status),
      error: row.error,
      reason: row.reason as RejectionReason,
      description: row.description,
      requestId: row.request_id,
      transactionId: row.transaction_id,
      gatewayRequestId: row.gateway_request_id,
    }));
  }

  /**
   * Drops rows older than the event retention, then all but the newest `maxRows` of the operator's view, the newest
   * `maxOutsiderRows` of outsiders' noise and the newest `maxRowsPerApp` of each app: each owner's rows are bounded
   * apart from the others'.
   */
  async purge(
    now = this.now(),
    maxRows = QUARANTINE_MAX_ROWS,
    maxRowsPerApp = QUARANTINE_MAX_ROWS_PER_APP,
    maxOutsiderRows = QUARANTINE_MAX_OUTSIDER_ROWS,
  ): Promise<number> {
    const old = await this.db
      .deleteFrom('mobile_id_rejections')
      .where('received_at', '<', now - this.retentionMs)
      .executeTakeFirst();
    let deleted =
      Number(old.numDeletedRows) + (await this.trim(null, maxRows)) + (await this.trim(OUTSIDERS, maxOutsiderRows));
    const crowded = await this.db
      .selectFrom('mobile_id_rejections')
      .select('scope')
      .where('scope', 'is not', null)
      .where('scope', '!=', OUTSIDERS)
      .groupBy('scope')
      .having((eb) => eb.fn.countAll(), '>', maxRowsPerApp)
      .execute();
    for (const { scope } of crowded) deleted += await this.trim(scope, maxRowsPerApp);
    return deleted;
  }

  /** Deletes all but the newest `keep` rows of one owner (null: the operator's view). */
  private async trim(scope: string | null, keep: number): Promise<number> {
    const select = this.db.selectFrom('mobile_id_rejections').select('id');
    // Ids sort in the order rows were written: everything at or below the first one past the limit goes.
    const boundary = await (scope === null ? select.where('scope', 'is', null) : select.where('scope', '=', scope))
      .orderBy('id', 'desc')
      .offset(keep)
      .limit(1)
      .executeTakeFirst();
    if (!boundary) return 0;
    const remove = this.db.deleteFrom('mobile_id_rejections').where('id', '<=', boundary.id);
    const res = await (
      scope === null ? remove.where('scope', 'is', null) : remove.where('scope', '=', scope)
    ).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
