import type { Kysely } from 'kysely';
import { ErrorCode, GatewayError, badUserInput, notFound } from '../errors.js';
import type { CancelSignal, EventRecord, Events } from '../events/index.js';
import type { Logger } from '../logger.js';
import type { Caller } from '../caller.js';
import { canonicalJson } from '../fingerprint.js';
import type { Database } from '../store/schema.js';
import { IdTokenVerifier, NO_CLAIMS, claimsOf, type IdTokenChecks, type IdTokenClaims, type VerifierOptions } from './verify.js';
import { RejectionQuarantine, authReqIdOf, type NewRejection, type Rejection, type RejectionReason } from './quarantine.js';
import type { SecretBox } from './sealing.js';
import { PendingVerifications } from './pending.js';
import type { Metrics } from '../metrics.js';
import { NotificationTokens, type IssuedToken, type NotifierAuth } from './tokens.js';
import { MAX_ID_LENGTH, decodeCompactJwt, extraFields, failureReason, isCompactJwe, parseNotification, type FailureReason } from './wire.js';

export const MOBILE_ID_EVENT_KIND = 'mobile-id';

/** Attempts before an id_token whose kid no key of the JWKS has is refused (the JWKS refetch cools down 30 s). */
const UNKNOWN_KEY_ATTEMPTS = 4;

/** Extra body fields whose values are credentials (a CIBA refresh_token, ...): sealed like the tokens. */
const SECRET_FIELD = /token|secret|password/i;

/** What the event log holds for a success notification: no token in clear (docs/decisions/005). */
interface StoredSuccess {
  v: 1;
  outcome: 'success';
  authReqId: string;
  tokenType: 'Bearer';
  /** Sealed; null once its expires_in has passed and the purge removed it. */
  accessToken: string | null;
  /** Sealed. */
  idToken: string;
  expiresIn: number;
  /** Epoch ms: reception plus expires_in. */
  expiresAt: number;
  claims: IdTokenClaims;
  /** The JWKS the id_token was verified against, or null when it was only decoded. */
  verifiedWith: string | null;
  /** What each id_token check found; absent on events stored before the checks were reported. */
  checks?: IdTokenChecks;
  jwksUri: string | null;
  leadingKycMatch: boolean | null;
  correlationId: string | null;
  /** Fields neither body shape names, as sent (credential-like ones in `sealedExtra`). */
  extra: Record<string, unknown>;
  sealedExtra: Record<string, string>;
}

interface StoredFailure {
  v: 1;
  outcome: 'failure';
  authReqId: string;
  error: string;
  errorDescription: string;
  reason: FailureReason;
  correlationId: string | null;
  extra: Record<string, unknown>;
  sealedExtra: Record<string, string>;
}

type StoredNotification = StoredSuccess | StoredFailure;

interface StoredMeta {
  /** X-Mobileid-Request-Id and X-Mobileid-Transaction-Id: the sender's references for technical support. */
  requestId: string | null;
  transactionId: string | null;
  contentType: string;
  /** The gateway's own request id of the delivery (its log lines carry it). */
  gatewayRequestId: string;
}

export interface MobileIdAuthenticated {
  outcome: 'success';
  authReqId: string;
  subject: string;
  acr: string | null;
  amr: string[] | null;
  issuer: string | null;
  /** Null once the token has expired. */
  accessToken: string | null;
  tokenType: string;
  expiresAt: Date;
  idToken: string;
  idTokenVerified: boolean;
  idTokenChecks: IdTokenChecks;
  jwksUri: string | null;
  leadingKycMatch: boolean | null;
  correlationId: string | null;
  requestId: string | null;
  transactionId: string | null;
  receivedAt: Date;
  otherFields: Record<string, unknown>;
}

export interface MobileIdAuthenticationFailed {
  outcome: 'failure';
  authReqId: string;
  error: string;
  errorDescription: string;
  reason: FailureReason;
  correlationId: string | null;
  requestId: string | null;
  transactionId: string | null;
  receivedAt: Date;
  otherFields: Record<string, unknown>;
}

export type MobileIdAuthentication = MobileIdAuthenticated | MobileIdAuthenticationFailed;

export type ReceiveResult =
  /** Stored: answer 204, then call `publish`. */
  | { status: 'accepted'; authReqId: string; outcome: 'success' | 'failure'; publish: () => Promise<void> }
  /** The same notification again: answer 204, publish nothing. */
  | { status: 'duplicate'; authReqId: string }
  /** Another notification for an auth_req_id that already has one: 409, nothing changed. */
  | { status: 'conflict'; authReqId: string }
  | { status: 'unauthorized'; description: string; authReqId: string | null }
  | { status: 'invalid'; reason: RejectionReason; description: string; authReqId: string | null }
  /** Stored durably but not verified yet (JWKS unreachable): answer 204; delivered once it is verified. */
  | { status: 'pending'; authReqId: string; description: string };

export interface NotificationHeaders {
  requestId: string | null;
  transactionId: string | null;
  contentType: string;
  gatewayRequestId: string;
}

/** The sandbox outcomes `sandboxComplete` can ask for: success, or a row of the spec's error table. */
export type SandboxOutcome = 'SUCCESS' | Exclude<FailureReason, 'UNKNOWN'>;

/** What the service needs of the mobile-ID sandbox (src/sandbox/mobile-id.ts): its keys, and POST one notification. */
export interface SandboxNotifier {
  readonly jwksUrl: string;
  readonly issuer: string;
  readonly clientId: string;
  /** The client_notification_token the sandbox gateway accepts from anyone. */
  readonly notificationToken: string;
  notify(options: { notificationUri: string; token: string; authReqId: string; outcome: SandboxOutcome }): Promise<{ status: number; body: string }>;
}

export interface SandboxDelivery {
  authReqId: string;
  outcome: SandboxOutcome;
  httpStatus: number;
  accepted: boolean;
  response: string | null;
}

export interface MobileIdServiceOptions {
  db: Kysely<Database>;
  events: Events;
  box: SecretBox;
  verifier: VerifierOptions;
  /** MOBILEID_NOTIFICATION_TOKENS, or the sandbox's token in sandbox mode. */
  notificationTokens: readonly { token: string; scope: string | null }[];
  logger: Logger;
  /** Present in sandbox mode only. */
  sandbox: SandboxNotifier | null;
  /** The gateway's own notification_uri (known once it listens). */
  notificationUri: () => string;
  /** How long refused notifications stay in the quarantine, and pending ones are retried (EVENT_RETENTION). */
  rejectionRetentionMs: number;
  metrics: Metrics;
}

export const TOKEN_TTL = { defaultSeconds: 3600, minSeconds: 10, maxSeconds: 7 * 86_400 } as const;

/**
 * The mobile-ID completion notifications: authenticates, checks, verifies and stores them (tokens sealed),
 * answers queries and subscriptions from the event log, and issues client_notification_tokens.
 */
export class MobileIdService {
  readonly tokens: NotificationTokens;
  readonly verifier: IdTokenVerifier;
  private readonly quarantine: RejectionQuarantine;
  private readonly events: Events;
  private readonly box: SecretBox;
  private readonly logger: Logger;

  constructor(private readonly options: MobileIdServiceOptions) {
    this.events = options.events;
    this.box = options.box;
    this.logger = options.logger;
    this.tokens = new NotificationTokens(options.db, options.notificationTokens);
    this.verifier = new IdTokenVerifier(options.verifier);
    this.quarantine = new RejectionQuarantine(options.db, options.rejectionRetentionMs);
    this.pending = new PendingVerifications(options.db);
  }

  private readonly pending: PendingVerifications;

  /** Checks the bearer token before the body is read. */
  authenticate(token: string | null): Promise<NotifierAuth> {
    return this.tokens.check(token);
  }

  /** Validates, verifies and durably stores one notification; the caller answers, then publishes. */
  async receive(auth: NotifierAuth & { ok: true }, body: unknown, headers: NotificationHeaders): Promise<ReceiveResult> {
    const parsed = parseNotification(body);
    if (!parsed.ok) return { status: 'invalid', reason: 'MALFORMED', description: parsed.description, authReqId: authReqIdOf(body) };
    const n = parsed.notification;
    const authReqId = n.body.auth_req_id;
    if (auth.authReqId !== null && auth.authReqId !== authReqId) {
      return { status: 'unauthorized', description: 'the client_notification_token was issued for another auth_req_id', authReqId };
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
      const existing = await this.events.log.byDedupeKey(dedupeKey);
      if (!existing) return null;
      return existing.fingerprint === fingerprint ? { status: 'duplicate', authReqId } : { status: 'conflict', authReqId };
    };

    const extra = extraFields(n);
    const sealedExtra: Record<string, string> = {};
    for (const [name, value] of Object.entries(extra)) {
      if (!SECRET_FIELD.test(name)) continue;
      sealedExtra[name] = this.box.seal(JSON.stringify(value), `${authReqId}\u0000extra:${name}`);
      delete extra[name];
    }
    const correlationId = n.body.correlation_id ?? null;
    let payload: StoredNotification;
    let secretsExpireAt: number | null = null;
    if (n.outcome === 'success') {
      const b = n.body;
      // Only the configured JWKS verifies signatures: jwks_uri (and any jwks_endpoint) from the body is recorded,
      // never fetched (spec: jwks_uri is the operator's key for encrypting kyc-match requests).
      const check = await this.verifier.check({ idToken: b.id_token, accessToken: b.access_token, authReqId });
      if (check.status !== 'accepted') {
        const known = await repeat();
        if (known) return known;
      }
      // An unknown kid may be a key the operator has rotated in but the JWKS cache has not seen yet: kept pending.
      if (check.status === 'rejected' && !check.unknownKey) return { status: 'invalid', reason: check.reason, description: check.description, authReqId };
      const expiresAt = Date.now() + b.expires_in * 1000;
      secretsExpireAt = expiresAt;
      payload = {
        v: 1,
        outcome: 'success',
        authReqId,
        tokenType: b.token_type,
        accessToken: this.box.seal(b.access_token, `${authReqId}\u0000access_token`),
        idToken: this.box.seal(b.id_token, `${authReqId}\u0000id_token`),
        expiresIn: b.expires_in,
        expiresAt,
        claims: isCompactJwe(b.id_token) ? NO_CLAIMS : claimsOf(decodeCompactJwt(b.id_token)!.claims),
        verifiedWith: check.status === 'accepted' ? check.keys : null,
        ...(check.status === 'accepted' ? { checks: check.checks } : {}),
        jwksUri: b.jwks_uri ?? null,
        leadingKycMatch: b.leading_kyc_match ?? null,
        correlationId,
        extra,
        sealedExtra,
      };
      if (check.status !== 'accepted') {
        // The sender does not retry: never "try again". Kept durably and sealed, verified later, delivered then.
        const receivedAt = Date.now();
        const kept = await this.pending.add({
          dedupeKey,
          authReqId,
          scope: auth.scope,
          fingerprint,
          payload,
          meta: headers as unknown as Record<string, unknown>,
          secretsExpireAt,
          receivedAt,
          giveUpAt: receivedAt + this.options.rejectionRetentionMs,
        });
        if (!kept.added) return kept.fingerprint === fingerprint ? { status: 'duplicate', authReqId } : { status: 'conflict', authReqId };
        this.options.metrics.mobileIdPending.inc();
        this.logger.warn({ authReqId, reason: check.description }, 'mobile-ID id_token cannot be verified now (JWKS unavailable, or no key for its kid yet): acknowledged, kept pending verification');
        return { status: 'pending', authReqId, description: check.description };
      }
    } else {
      const b = n.body;
      payload = {
        v: 1,
        outcome: 'failure',
        authReqId,
        error: b.error,
        errorDescription: b.error_description,
        reason: failureReason(b.error, b.error_description),
        correlationId,
        extra,
        sealedExtra,
      };
    }
    const meta: StoredMeta = headers;
    const result = await this.events.ingest({
      kind: MOBILE_ID_EVENT_KIND,
      key: authReqId,
      // One notification per authentication request and owner: a second one is a duplicate or a conflict.
      dedupeKey,
      payload,
      meta: meta as unknown as Record<string, unknown>,
      scope: auth.scope,
      fingerprint,
      secretsExpireAt,
    });
    if (result.status === 'duplicate') return { status: 'duplicate', authReqId };
    if (result.status === 'conflict') return { status: 'conflict', authReqId };
    return { status: 'accepted', authReqId, outcome: n.outcome, publish: result.publish };
  }

  /** The stored result of an authentication, or null (also when it belongs to another app's API key). */
  async get(caller: Caller, authReqId: string): Promise<MobileIdAuthentication | null> {
    checkAuthReqId(authReqId);
    const event = await this.events.latest(MOBILE_ID_EVENT_KIND, authReqId, caller);
    return event ? this.view(event) : null;
  }

  /** Batched `get`, in the order of `authReqIds` (one SQL statement for every id of an operation). */
  async getMany(caller: Caller, authReqIds: readonly string[]): Promise<(MobileIdAuthentication | null)[]> {
    const events = await this.events.log.latestMany(MOBILE_ID_EVENT_KIND, authReqIds, caller);
    return events.map((e) => (e ? this.view(e) : null));
  }

  /**
   * The stored notification event at once when there is one, else the live one when it arrives; then the stream
   * ends (an authentication completes once). `authentication(event)` is what it says: the subscription maps each
   * event there, once per event for all its identical subscribers (docs/decisions/030), rather than here once per
   * subscriber (which also costs one suspended generator per waiting subscription).
   */
  watch(caller: Caller, authReqId: string, signal?: CancelSignal): AsyncGenerator<EventRecord> {
    checkAuthReqId(authReqId);
    // Another app's result is skipped: the stream waits as it would for an authentication with no result yet.
    return this.events.streams.subscribe({ kind: MOBILE_ID_EVENT_KIND, key: authReqId, limit: 1, reader: caller }, signal);
  }

  /** The authentication an event of `watch` records (its tokens opened). */
  authentication(event: EventRecord): MobileIdAuthentication {
    return this.view(event);
  }

  async issueNotificationToken(caller: Caller, options: { authReqId?: string | null; ttlSeconds?: number | null }): Promise<IssuedToken> {
    const authReqId = options.authReqId ?? null;
    if (authReqId !== null) checkAuthReqId(authReqId);
    const ttl = options.ttlSeconds ?? TOKEN_TTL.defaultSeconds;
    if (!Number.isInteger(ttl) || ttl < TOKEN_TTL.minSeconds || ttl > TOKEN_TTL.maxSeconds) {
      throw badUserInput('ttlSeconds', `must be from ${TOKEN_TTL.minSeconds} to ${TOKEN_TTL.maxSeconds}`);
    }
    return this.tokens.issue(caller, { authReqId, ttlMs: ttl * 1000 });
  }

  /**
   * Sandbox only: the sandbox sends the gateway's own endpoint, over HTTP, the notification the real service
   * would send at the end of authentication `authReqId`, authenticated with a token issued here for it.
   */
  async sandboxComplete(caller: Caller, authReqId: string, outcome: SandboxOutcome): Promise<SandboxDelivery> {
    const sandbox = this.options.sandbox;
    if (!sandbox) {
      throw new GatewayError(
        ErrorCode.BAD_USER_INPUT,
        'sandboxCompleteMobileIdAuthentication works only in sandbox mode (MOBILEID_NOTIFICATION_TOKENS and MOBILEID_JWKS_URL/FILE unset); the real mobile identity service sends its notifications itself',
        { sandboxOnly: true },
      );
    }
    checkAuthReqId(authReqId);
    const { token } = await this.tokens.issue(caller, { authReqId, ttlMs: 300_000 });
    const res = await sandbox.notify({ notificationUri: this.options.notificationUri(), token, authReqId, outcome });
    const accepted = res.status >= 200 && res.status < 300;
    return { authReqId, outcome, httpStatus: res.status, accepted, response: res.body === '' ? null : res.body };
  }

  /** Keeps a refused notification, without secrets, for operators; false when it was only counted. */
  reject(rejection: NewRejection): Promise<boolean> {
    return this.quarantine.record(rejection);
  }

  /**
   * Verifies the pending notifications that are due (docs/decisions/040): a verified one goes to the event log
   * and its subscribers, as if it had been verified on arrival; a refused one, or one still unverifiable at
   * EVENT_RETENTION, goes to the quarantine; the rest wait for their next attempt. The id_token is judged at the
   * time it arrived (exp against reception), not at the time the keys came back.
   */
  async verifyPending(now = Date.now()): Promise<{ verified: number; refused: number; waiting: number }> {
    const out = { verified: 0, refused: 0, waiting: 0 };
    for (const row of await this.pending.claimDue(now)) {
      const p = row.payload as StoredSuccess;
      const meta = row.meta as Partial<StoredMeta>;
      const refuse = async (reason: RejectionReason, error: string, description: string) => {
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
        this.options.metrics.mobileIdPendingRefused.inc({ reason });
        this.options.metrics.mobileIdRejections.inc({ reason });
        this.logger.error({ authReqId: p.authReqId, reason, description }, 'pending mobile-ID notification refused after verification; kept in the quarantine');
        out.refused += 1;
      };
      const idToken = this.box.open(p.idToken, `${p.authReqId}\u0000id_token`);
      const accessToken = p.accessToken === null ? '' : this.box.open(p.accessToken, `${p.authReqId}\u0000access_token`);
      const check = await this.verifier.check({ idToken, accessToken, authReqId: p.authReqId, at: row.receivedAt });
      if (check.status === 'accepted') {
        const result = await this.events.ingest({
          kind: MOBILE_ID_EVENT_KIND,
          key: p.authReqId,
          dedupeKey: row.dedupeKey,
          payload: { ...p, verifiedWith: check.keys, checks: check.checks },
          meta: row.meta,
          scope: row.scope,
          fingerprint: row.fingerprint,
          secretsExpireAt: row.secretsExpireAt,
        });
        if (result.status === 'conflict') {
          await refuse('CONFLICT', 'invalid_request', 'a different notification was received for this auth_req_id meanwhile');
          continue;
        }
        await this.pending.remove(row.dedupeKey);
        await result.publish();
        this.options.metrics.mobileIdVerifiedLate.inc();
        this.logger.info({ authReqId: p.authReqId, attempts: row.attempts + 1 }, 'pending mobile-ID notification verified and delivered');
        out.verified += 1;
      } else if (check.status === 'rejected' && !(check.unknownKey && row.attempts + 1 < UNKNOWN_KEY_ATTEMPTS)) {
        await refuse(check.reason, 'invalid_request', check.description);
      } else if (now >= row.giveUpAt) {
        await refuse('JWKS_UNAVAILABLE', 'temporarily_unavailable', `the JWKS could still not be loaded after EVENT_RETENTION (${check.description})`);
      } else {
        await this.pending.reschedule(row.dedupeKey, row.attempts + 1, now);
        out.waiting += 1;
      }
    }
    this.options.metrics.mobileIdPending.set(await this.pending.count());
    return out;
  }

  /** Refused notifications, newest first: all of them for an operator, those on tokens it issued for an app. */
  rejections(caller: Caller, options: { first?: number | null; authReqId?: string | null }): Promise<Rejection[]> {
    const first = options.first ?? 50;
    if (!Number.isInteger(first) || first < 1 || first > 500) throw badUserInput('first', 'must be from 1 to 500');
    if (options.authReqId != null) checkAuthReqId(options.authReqId);
    return this.quarantine.list(caller, { first, authReqId: options.authReqId ?? null });
  }

  /** Removes expired access tokens from stored events and expired notification tokens. */
  async purgeExpired(now = Date.now()): Promise<{ accessTokens: number; notificationTokens: number }> {
    const accessTokens = await this.events.log.redactExpiredSecrets(
      MOBILE_ID_EVENT_KIND,
      (p) => ((p as StoredNotification).outcome === 'success' ? { ...(p as StoredSuccess), accessToken: null } : p),
      now,
    );
    const notificationTokens = await this.tokens.purgeExpired(now);
    await this.quarantine.purge(now);
    return { accessTokens, notificationTokens };
  }

  private view(event: EventRecord): MobileIdAuthentication {
    const p = event.payload as StoredNotification;
    const meta = event.meta as Partial<StoredMeta>;
    const otherFields = { ...p.extra };
    for (const [name, sealed] of Object.entries(p.sealedExtra ?? {})) {
      otherFields[name] = JSON.parse(this.box.open(sealed, `${p.authReqId}\u0000extra:${name}`)) as unknown;
    }
    const common = {
      authReqId: p.authReqId,
      correlationId: p.correlationId,
      requestId: meta.requestId ?? null,
      transactionId: meta.transactionId ?? null,
      receivedAt: event.receivedAt,
      otherFields,
    };
    if (p.outcome === 'failure') {
      return { outcome: 'failure', ...common, error: p.error, errorDescription: p.errorDescription, reason: p.reason };
    }
    // Between expiry and the next purge run the sealed token is still stored; it is not handed out.
    const sealedAccess = p.accessToken !== null && p.expiresAt > Date.now() ? p.accessToken : null;
    const box = this.box;
    let accessToken: string | null | undefined;
    let idToken: string | undefined;
    const view = {
      outcome: 'success',
      ...common,
      subject: p.claims.sub,
      acr: p.claims.acr,
      amr: p.claims.amr,
      issuer: p.claims.iss,
      tokenType: p.tokenType,
      expiresAt: new Date(p.expiresAt),
      idTokenVerified: p.verifiedWith !== null,
      idTokenChecks: p.checks ? { ...p.checks, notCheckedReason: p.checks.notCheckedReason ?? legacyReason(p.checks) } : legacyChecks(p.verifiedWith !== null),
      jwksUri: p.jwksUri,
      leadingKycMatch: p.leadingKycMatch,
    } as Omit<MobileIdAuthenticated, 'accessToken' | 'idToken'> as MobileIdAuthenticated;
    // The tokens are opened (AES-GCM) when first read, once: a selection without them never decrypts them. A
    // subscriber of its own auth_req_id executes alone, so each delivery used to open both (bench scenario 7).
    Object.defineProperties(view, {
      accessToken: {
        enumerable: true,
        get: () => (accessToken === undefined ? (accessToken = sealedAccess === null ? null : box.open(sealedAccess, `${p.authReqId}\u0000access_token`)) : accessToken),
      },
      idToken: { enumerable: true, get: () => (idToken ??= box.open(p.idToken, `${p.authReqId}\u0000id_token`)) },
    });
    return view;
  }
}

/** Events stored before the checks were reported were verified in full (every claim required), or not at all. */
function legacyChecks(verified: boolean): IdTokenChecks {
  const r = verified ? 'VALID' : 'NOT_CHECKED';
  return { signature: r, issuer: r, audience: r, expiry: r, authReqIdClaim: r, atHash: r, strict: verified, notCheckedReason: verified ? null : 'no JWKS was configured: the id_token was only decoded' };
}

/** Checks stored before the reason was: NOT_CHECKED then only ever meant that no JWKS was configured. */
function legacyReason(checks: IdTokenChecks): string | null {
  return checks.signature === 'NOT_CHECKED' ? 'no JWKS was configured: the id_token was only decoded' : null;
}

/**
 * The dedupe key of a notification: per owner of the token that carried it. A shared (configured, unbound)
 * token keeps the key it always had, so a repeat of a notification stored before owners were told apart is
 * still recognised.
 */
export function mobileIdDedupeKey(scope: string | null, authReqId: string): string {
  return scope === null ? `${MOBILE_ID_EVENT_KIND}:${authReqId}` : `${MOBILE_ID_EVENT_KIND}@${scope}:${authReqId}`;
}

/** BAD_USER_INPUT for an authReqId argument that no notification can carry. */
export function checkAuthReqId(authReqId: string): void {
  if (authReqId.length === 0 || authReqId.length > MAX_ID_LENGTH) throw badUserInput('authReqId', `must be 1 to ${MAX_ID_LENGTH} characters`);
}
