// The intake of completion notifications: each one parsed, deduplicated, verified, its secrets sealed, and stored
// in the event log; one whose id_token cannot be verified yet is kept pending and verified later (docs/decisions/040).
import { WebhookErrorCode } from '../errors.js';
import { mobileIdDedupeKey, type Events, type StorageCharge } from '../events/index.js';
import { canonicalJson } from '../fingerprint.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { SecretBox } from '../secret.js';
import { StorageBoundError, type AppStorage, type StorageRefusal } from '../store/app-storage.js';
import type { PendingVerifications } from './pending.js';
import { authReqIdOf, type RejectionQuarantine, type RejectionReason } from './quarantine.js';
import {
  MAX_EXTRA_FIELDS_CHARS,
  MOBILE_ID_EVENT_KIND,
  notificationContext,
  openAccessToken,
  openIdToken,
  openPersonal,
  type SealedPersonal,
  type StoredMeta,
  type StoredNotification,
  type StoredSuccess,
} from './stored.js';
import type { NotifierAuth } from './tokens.js';
import { claimsOf, NO_CLAIMS, type IdTokenVerifier } from './verify.js';
import type { ClearParts } from './views.js';
import { extraFields, failureReason, parseNotification, setField } from './wire.js';

/** Attempts before an id_token whose kid no key of the JWKS has is refused (the JWKS refetch cools down 30 s). */
const UNKNOWN_KEY_ATTEMPTS = 4;

/**
 * The version notifications are stored with now (stored.ts StoredVersion): everything personal sealed in one value,
 * bound to its owner.
 */
const STORED_VERSION = 4;

/**
 * The unknown fields of a notification that fit in MAX_EXTRA_FIELDS_CHARS, in the order sent; the rest are dropped
 * and counted. Each field's size is its name and its value's JSON.
 */
function keptExtra(extra: Record<string, unknown>): {
  kept: Record<string, unknown>;
  dropped: { fields: number; chars: number } | null;
} {
  const kept: Record<string, unknown> = {};
  let used = 2;
  let fields = 0;
  let chars = 0;
  for (const [name, value] of Object.entries(extra)) {
    const size = name.length + (JSON.stringify(value) ?? 'null').length + 4;
    if (used + size <= MAX_EXTRA_FIELDS_CHARS) {
      setField(kept, name, value);
      used += size;
    } else {
      fields += 1;
      chars += size;
    }
  }
  return { kept, dropped: fields ? { fields, chars } : null };
}

export type ReceiveResult =
  /** Stored: answer 204, then call `publish`. */
  | { status: 'accepted'; authReqId: string; outcome: 'success' | 'failure'; publish: () => Promise<void> }
  /** The same notification again: answer 204, publish nothing. */
  | { status: 'duplicate'; authReqId: string }
  /** Another notification for an auth_req_id that already has one: 409, nothing changed. */
  | { status: 'conflict'; authReqId: string }
  | { status: 'unauthorized'; description: string; authReqId: string | null }
  | { status: 'invalid'; reason: RejectionReason; description: string; authReqId: string | null }
  /** The token's app has reached a storage bound (src/store/app-storage.ts): refused, nothing stored. */
  | { status: 'over-bound'; refusal: StorageRefusal; authReqId: string }
  /** Stored durably but not verified yet (JWKS unreachable): answer 204; delivered once it is verified. */
  | { status: 'pending'; authReqId: string; description: string }
  /** Not verifiable now, and its owner already has MOBILEID_PENDING_MAX_PER_APP pending: nothing stored (429). */
  | { status: 'over-limit'; authReqId: string; description: string };

export interface NotificationHeaders {
  requestId: string | null;
  transactionId: string | null;
  contentType: string;
  gatewayRequestId: string;
}

interface IntakeOptions {
  events: Events;
  box: SecretBox;
  verifier: IdTokenVerifier;
  pending: PendingVerifications;
  quarantine: RejectionQuarantine;
  /** How long pending notifications are retried (EVENT_RETENTION). */
  rejectionRetentionMs: number;
  /** MOBILEID_PENDING_MAX_PER_APP (named in the refusal). */
  pendingLimit: number;
  /** The per-app storage bounds: a notification on an app's token counts against its app's (null: no bounds). */
  storage: AppStorage | null;
  metrics: Metrics;
  logger: Logger;
  /** DELIVERY_CLEAR_FROM_INTAKE: the stored event carries its clear values to this process's live subscribers (EventRecord.clear). */
  clearFromIntake?: boolean;
  /**
   * DELIVERY_PAYLOAD_FROM_INTAKE: the published event carries the payload and meta objects built here (NewEvent.asGiven),
   * not their stored JSON parsed back.
   */
  payloadFromIntake?: boolean;
  /** MOBILEID_PLAIN_CHECKS: a well-formed notification checked by plain code, zod for the rest (decision 158). */
  plainChecks?: boolean;
  /** Epoch ms: the reception time of pending notifications and the clock of the retry schedules (tests control it). */
  now?: () => number;
}

export class NotificationIntake {
  private readonly events: Events;
  private readonly box: SecretBox;
  private readonly verifier: IdTokenVerifier;
  private readonly pending: PendingVerifications;
  private readonly quarantine: RejectionQuarantine;
  private readonly logger: Logger;
  private readonly now: () => number;

  constructor(private readonly options: IntakeOptions) {
    this.now = options.now ?? Date.now;
    this.events = options.events;
    this.box = options.box;
    this.verifier = options.verifier;
    this.pending = options.pending;
    this.quarantine = options.quarantine;
    this.logger = options.logger;
  }

  /** Validates, verifies and durably stores one notification; the caller answers, then publishes. */
  async receive(
    auth: NotifierAuth & { ok: true },
    body: unknown,
    headers: NotificationHeaders,
  ): Promise<ReceiveResult> {
    const parsed = parseNotification(body, this.options.plainChecks === true);
    if (!parsed.ok)
      return { status: 'invalid', reason: 'MALFORMED', description: parsed.description, authReqId: authReqIdOf(body) };
    const n = parsed.notification;
    const authReqId = n.body.auth_req_id;
    if (auth.authReqId !== null && auth.authReqId !== authReqId) {
      return {
        status: 'unauthorized',
        description: 'the client_notification_token was issued for another auth_req_id',
        authReqId,
      };
    }

    // The sealed tokens differ on every delivery (fresh IVs): compare the clear body through a keyed digest.
    const fingerprint = this.box.digest(canonicalJson(n.body) ?? '');
    // One notification per authentication request and owner: a notification on one app's token is compared only
    // with that app's, so it can neither block another app's result nor learn from the answer that one exists.
    const dedupeKey = mobileIdDedupeKey(auth.scope, authReqId);
    // A repeat is told from a first delivery by the append itself (one statement: the unique dedupe key).
    // Whatever refuses a notification is checked against the log first: a duplicate that arrives after the
    // id_token's exp (or while the JWKS is down) is still the notification that was accepted.
    const repeat = async (): Promise<ReceiveResult | null> => {
      const existing = await this.events.log.byDedupeKey(MOBILE_ID_EVENT_KIND, authReqId, dedupeKey);
      if (!existing) return null;
      return existing.fingerprint === fingerprint
        ? { status: 'duplicate', authReqId }
        : { status: 'conflict', authReqId };
    };

    // Unknown fields are kept up to a small size, sealed whole (a sender's extension may carry anything personal).
    const scope = auth.scope;
    const { kept, dropped } = keptExtra(extraFields(n));
    if (dropped) {
      this.options.metrics.webhookFieldsDropped.inc({ endpoint: 'mobile-id' }, dropped.fields);
      this.logger.warn(
        { authReqId, droppedFields: dropped.fields, droppedBytes: dropped.chars },
        `mobile-ID notification: unknown fields over ${MAX_EXTRA_FIELDS_CHARS} bytes were not kept`,
      );
    }
    // What is sealed below, in clear, for this process's live subscribers (DELIVERY_CLEAR_FROM_INTAKE; never stored).
    const clear: ClearParts = { personal: null, accessToken: null, idToken: null };
    const charge = this.charge(scope);
    const correlationId = n.body.correlation_id ?? null;
    const now = this.now();
    let payload: StoredNotification;
    let secretsExpireAt: number | null = null;
    if (n.outcome === 'success') {
      const b = n.body;
      // Only the configured JWKS verifies signatures: jwks_uri (and any jwks_endpoint) from the body is recorded,
      // never fetched (spec: jwks_uri is the operator's key for encrypting kyc-match requests).
      const check = await this.verifier.check({ idToken: b.id_token, accessToken: b.access_token, authReqId, now });
      if (check.status !== 'accepted') {
        const known = await repeat();
        if (known) return known;
      }
      // An unknown kid may be a key the operator has rotated in but the JWKS cache has not seen yet: kept pending.
      if (check.status === 'rejected' && !check.unknownKey)
        return { status: 'invalid', reason: check.reason, description: check.description, authReqId };
      const expiresAt = now + b.expires_in * 1000;
      secretsExpireAt = expiresAt;
      const claims = n.idToken === null ? NO_CLAIMS : claimsOf(n.idToken.claims);
      clear.accessToken = b.access_token;
      clear.idToken = b.id_token;
      payload = {
        v: STORED_VERSION,
        outcome: 'success',
        authReqId,
        tokenType: b.token_type,
        // Sealed in `sealedPersonal`, until the secrets sweep seals the rest again without it.
        accessToken: null,
        expiresIn: b.expires_in,
        expiresAt,
        // The subject (the number owner's identifier) is personal data: sealed, with the tokens.
        claims: { ...claims, sub: null },
        sealedPersonal: this.sealPersonal(clear, scope, authReqId, claims.sub, kept, b.id_token, b.access_token),
        verifiedWith: check.status === 'accepted' ? check.keys : null,
        ...(check.status === 'accepted' ? { checks: check.checks } : {}),
        jwksUri: b.jwks_uri ?? null,
        leadingKycMatch: b.leading_kyc_match ?? null,
        correlationId,
        extra: {},
        sealedExtra: {},
        droppedExtra: dropped,
      };
      if (check.status !== 'accepted') {
        // The sender does not retry: never "try again". Kept durably and sealed, verified later, delivered then.
        const receivedAt = now;
        const kept = await this.pending.add(
          {
            dedupeKey,
            authReqId,
            scope: auth.scope,
            fingerprint,
            payload,
            meta: headers as unknown as Record<string, unknown>,
            secretsExpireAt,
            receivedAt,
            giveUpAt: receivedAt + this.options.rejectionRetentionMs,
          },
          charge,
        );
        if ('overLimit' in kept) {
          return {
            status: 'over-limit',
            authReqId,
            description: `the id_token cannot be verified now, and ${this.options.pendingLimit} notifications on this token's owner already wait for verification (MOBILEID_PENDING_MAX_PER_APP): not stored`,
          };
        }
        if ('refused' in kept) return { status: 'over-bound', refusal: kept.refused, authReqId };
        if (!kept.added)
          return kept.fingerprint === fingerprint
            ? { status: 'duplicate', authReqId }
            : { status: 'conflict', authReqId };
        this.options.metrics.mobileIdPending.inc();
        this.logger.warn(
          { authReqId, reason: check.description },
          'mobile-ID id_token cannot be verified now (JWKS unavailable, or no key for its kid yet): acknowledged, kept pending verification',
        );
        return { status: 'pending', authReqId, description: check.description };
      }
    } else {
      const b = n.body;
      payload = {
        v: STORED_VERSION,
        outcome: 'failure',
        authReqId,
        error: b.error,
        errorDescription: b.error_description,
        reason: failureReason(b.error, b.error_description),
        correlationId,
        sealedPersonal: this.sealPersonal(clear, scope, authReqId, null, kept),
        extra: {},
        sealedExtra: {},
        droppedExtra: dropped,
      };
    }
    const meta: StoredMeta = headers;
    let result;
    try {
      result = await this.events.ingest({
        kind: MOBILE_ID_EVENT_KIND,
        key: authReqId,
        // One notification per authentication request and owner: a second one is a duplicate or a conflict.
        dedupeKey,
        payload,
        meta: meta as unknown as Record<string, unknown>,
        scope: auth.scope,
        fingerprint,
        secretsExpireAt,
        // Plain JSON data built above and not touched after the append: published as it is (DELIVERY_PAYLOAD_FROM_INTAKE).
        asGiven: this.options.payloadFromIntake === true,
        ...(charge ? { charge } : {}),
      });
    } catch (err) {
      if (err instanceof StorageBoundError) return { status: 'over-bound', refusal: err.refusal, authReqId };
      throw err;
    }
    if (result.status === 'duplicate') return { status: 'duplicate', authReqId };
    if (result.status === 'conflict') return { status: 'conflict', authReqId };
    // On the event object it publishes, typed and never stored; only when someone here waits for it, so that an
    // event nobody on this process subscribes to holds no clear value in memory.
    if (
      this.options.clearFromIntake &&
      this.events.bus.subscribers(MOBILE_ID_EVENT_KIND, authReqId) +
        this.events.bus.subscribers(MOBILE_ID_EVENT_KIND, null) >
        0
    )
      result.event.clear = clear;
    return { status: 'accepted', authReqId, outcome: n.outcome, publish: result.publish };
  }

  /**
   * The sealed `personal` field (null when there is nothing to seal), its clear value kept in `clear`: the subject, the
   * kept unknown fields and a success's tokens, one seal per notification (the secrets sweep seals the rest again
   * without the access token when it expires: stored.ts withoutAccessToken).
   */
  private sealPersonal(
    clear: ClearParts,
    scope: string | null,
    authReqId: string,
    sub: string | null,
    kept: Record<string, unknown>,
    idToken?: string,
    accessToken?: string,
  ): string | null {
    if (idToken === undefined && sub === null && Object.keys(kept).length === 0) return null;
    const value: SealedPersonal =
      idToken === undefined ? { sub, fields: kept } : { sub, fields: kept, idToken, accessToken };
    clear.personal = value;
    return this.box.seal(JSON.stringify(value), notificationContext(STORED_VERSION, scope, authReqId, 'personal'));
  }

  /** The storage bound a notification on `scope`'s token counts against; none for a shared configured token. */
  private charge(scope: string | null): StorageCharge | null {
    const storage = this.options.storage;
    if (scope === null || storage === null) return null;
    return storage.charge('events', scope);
  }

  /**
   * Verifies the pending notifications that are due (docs/decisions/040): a verified one goes to the event log
   * and its subscribers, as if it had been verified on arrival; a refused one, or one still unverifiable at
   * EVENT_RETENTION, goes to the quarantine; the rest wait for their next attempt. The id_token is judged at the
   * time it arrived (exp against reception), not at the time the keys came back. A pass is shared across owners
   * (PendingVerifications.claimDue), and while the JWKS is down it costs at most the one fetch its schedule allows.
   */
  async verifyPending(now = this.now()): Promise<{ verified: number; refused: number; waiting: number }> {
    const out = { verified: 0, refused: 0, waiting: 0 };
    for (const row of await this.pending.claimDue(now)) {
      const p = row.payload as StoredSuccess;
      const meta = row.meta as Partial<StoredMeta>;
      const refuse = async (reason: RejectionReason, error: WebhookErrorCode, description: string) => {
        await this.quarantine.record({
          authReqId: p.authReqId,
          httpStatus: 204,
          error,
          reason,
          description: `acknowledged with 204 while the id_token could not be verified, refused when verified later: ${description}`,
          requestId: meta.requestId ?? null,
          transactionId: meta.transactionId ?? null,
          gatewayRequestId: meta.gatewayRequestId ?? '',
          scope: row.scope,
        });
        await this.pending.remove(row.dedupeKey);
        // Counted against its owner's bound when it was kept pending; it is gone without becoming an event.
        if (row.scope !== null) this.options.storage?.release('events', row.scope, 1, row.chars);
        this.options.metrics.mobileIdPendingRefused.inc({ reason });
        this.options.metrics.mobileIdRejections.inc({ reason });
        this.logger.error(
          { authReqId: p.authReqId, reason, description },
          'pending mobile-ID notification refused after verification; kept in the quarantine',
        );
        out.refused += 1;
      };
      let personal: SealedPersonal | null | undefined;
      const opened = () => (personal === undefined ? (personal = openPersonal(this.box, p, row.scope)) : personal);
      const idToken = openIdToken(this.box, p, row.scope, opened);
      const accessToken = openAccessToken(this.box, p, row.scope, opened) ?? '';
      const check = await this.verifier.check({
        idToken,
        accessToken,
        authReqId: p.authReqId,
        at: row.receivedAt,
        now,
      });
      if (check.status === 'accepted') {
        const result = await this.events.ingest({
          kind: MOBILE_ID_EVENT_KIND,
          key: p.authReqId,
          dedupeKey: row.dedupeKey,
          // Not a spread with new keys: on Node 20 that makes a hidden class a call (docs/decisions/120).
          payload: Object.assign({}, p, { verifiedWith: check.keys, checks: check.checks }),
          meta: row.meta,
          scope: row.scope,
          fingerprint: row.fingerprint,
          secretsExpireAt: row.secretsExpireAt,
        });
        if (result.status === 'conflict') {
          await refuse(
            'CONFLICT',
            WebhookErrorCode.INVALID_REQUEST,
            'a different notification was received for this auth_req_id meanwhile',
          );
          continue;
        }
        // Appended, it is published whatever the pending row's removal does: the next pass finds the event a duplicate
        // and publishes nothing, so on SQLite (no other replica reads it from the log) skipping it here would lose it
        // for live subscribers. A row left behind is removed by that pass.
        let removed = true;
        try {
          await this.pending.remove(row.dedupeKey);
        } catch (err) {
          removed = false;
          this.logger.error(
            { err, authReqId: p.authReqId },
            'pending mobile-ID notification verified and stored, but its pending row could not be removed; published, and removed at the next pass',
          );
        }
        // Its exact repeat was stored meanwhile, and counted then: what was counted when this one was kept goes back.
        if (removed && result.status === 'duplicate' && row.scope !== null)
          this.options.storage?.release('events', row.scope, 1, row.chars);
        await result.publish();
        this.options.metrics.mobileIdVerifiedLate.inc();
        this.logger.info(
          { authReqId: p.authReqId, attempts: row.attempts + 1 },
          'pending mobile-ID notification verified and delivered',
        );
        out.verified += 1;
      } else if (check.status === 'rejected' && !(check.unknownKey && row.attempts + 1 < UNKNOWN_KEY_ATTEMPTS)) {
        await refuse(check.reason, WebhookErrorCode.INVALID_REQUEST, check.description);
      } else if (now >= row.giveUpAt) {
        await refuse(
          'JWKS_UNAVAILABLE',
          WebhookErrorCode.TEMPORARILY_UNAVAILABLE,
          `the JWKS could still not be loaded after EVENT_RETENTION (${check.description})`,
        );
      } else {
        await this.pending.reschedule(row.dedupeKey, row.attempts + 1, now);
        out.waiting += 1;
      }
    }
    this.options.metrics.mobileIdPending.set(await this.pending.count());
    return out;
  }
}
