import type { Kysely } from 'kysely';

import type { Caller } from '../auth/caller.js';
import type { EventRecord, Events, Resume } from '../events/index.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { SecretBox } from '../secret.js';
import type { AppStorage } from '../store/app-storage.js';
import type { Database } from '../store/schema.js';
import { NotificationIntake, type NotificationHeaders, type ReceiveResult } from './intake.js';
import { PendingVerifications } from './pending.js';
import { RejectionQuarantine, type NewRejection, type Rejection } from './quarantine.js';
import { SandboxTrigger, type SandboxDelivery, type SandboxNotifier, type SandboxOutcome } from './sandbox-trigger.js';
import { checkAuthReqId, MOBILE_ID_EVENT_KIND, withoutAccessToken, type StoredNotification } from './stored.js';
import { NotificationTokens, type IssuedToken, type NotifierAuth } from './tokens.js';
import { IdTokenVerifier, type VerifierOptions } from './verify.js';
import { authenticationView, type MobileIdAuthentication } from './views.js';

interface MobileIdServiceOptions {
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
  /** MOBILEID_PENDING_MAX_PER_APP: the most notifications one owner may have pending verification. */
  pendingLimit: number;
  /** Per-app storage bounds (notifications on an app's tokens, its live tokens); null: none. */
  storage: AppStorage | null;
  metrics: Metrics;
  /** DELIVERY_CLEAR_FROM_INTAKE: a notification taken in here hands its live subscribers here its clear values (decision 062). */
  clearFromIntake?: boolean;
  /** DELIVERY_PAYLOAD_FROM_INTAKE: a notification taken in here is published with the payload the intake built (decision 097). */
  payloadFromIntake?: boolean;
  /** MOBILEID_PLAIN_CHECKS: a well-formed notification checked by plain code, zod for the rest (decision 158). */
  plainChecks?: boolean;
  /**
   * Tests only: the clock (epoch ms) of access token expiry, notification tokens, pending notifications, the JWKS
   * retry schedule and the quarantine of refused notifications. Default Date.now.
   */
  now?: (() => number) | undefined;
}

/** The stream ends on the caller's first result: one a resume cursor covers ended the stream it resumes. */
const FIRST_RESULT_ENDS = (): boolean => true;

/**
 * The mobile-ID completion notifications: authenticates, checks, verifies and stores them (tokens sealed),
 * answers queries and subscriptions from the event log, and issues client_notification_tokens. Each role has
 * its own module (intake, views, tokens, quarantine, the sandbox trigger); this is the one object the webhook,
 * the resolvers and the composition root call.
 */
export class MobileIdService {
  private readonly events: Events;
  private readonly box: SecretBox;
  private readonly tokens: NotificationTokens;
  private readonly quarantine: RejectionQuarantine;
  private readonly intake: NotificationIntake;
  private readonly sandbox: SandboxTrigger;
  private readonly pending: PendingVerifications;
  private readonly now: () => number;
  private readonly logger: Logger;

  private readonly keys: MobileIdServiceOptions['verifier']['keys'];

  constructor(options: MobileIdServiceOptions) {
    // Date.now read at each call, not captured: a test that fakes Date after start-up moves this clock too.
    this.now = options.now ?? (() => Date.now());
    this.keys = options.verifier.keys;
    this.events = options.events;
    this.box = options.box;
    this.logger = options.logger;
    this.tokens = new NotificationTokens(options.db, options.notificationTokens, options.storage);
    this.quarantine = new RejectionQuarantine(options.db, options.rejectionRetentionMs, this.now);
    this.pending = new PendingVerifications(options.db, options.pendingLimit);
    this.intake = new NotificationIntake({
      events: options.events,
      box: options.box,
      verifier: new IdTokenVerifier(options.verifier),
      pending: this.pending,
      quarantine: this.quarantine,
      rejectionRetentionMs: options.rejectionRetentionMs,
      pendingLimit: options.pendingLimit,
      storage: options.storage,
      metrics: options.metrics,
      logger: options.logger,
      clearFromIntake: options.clearFromIntake ?? false,
      payloadFromIntake: options.payloadFromIntake ?? false,
      plainChecks: options.plainChecks ?? false,
      now: this.now,
    });
    this.sandbox = new SandboxTrigger(options.sandbox, this.tokens, options.notificationUri);
  }

  /**
   * Reads MOBILEID_JWKS_FILE again (a reload, docs/decisions/057): the swap to make once every file of the reload is
   * good, or null when the keys come from no file; throws for a bad file.
   */
  prepareKeysReload(): (() => void) | null {
    return this.keys?.reload?.() ?? null;
  }

  /** Checks the bearer token before the body is read (a promise only when an issued token is looked up). */
  authenticate(token: string | null): NotifierAuth | Promise<NotifierAuth> {
    return this.tokens.check(token, this.now());
  }

  /** Validates, verifies and durably stores one notification; the caller answers, then publishes. */
  receive(auth: NotifierAuth & { ok: true }, body: unknown, headers: NotificationHeaders): Promise<ReceiveResult> {
    return this.intake.receive(auth, body, headers);
  }

  /**
   * The stored results of authentications, in the order of `authReqIds`, each null when absent or another app's API
   * key's (one SQL statement for every id of an operation).
   */
  async getMany(caller: Caller, authReqIds: readonly string[]): Promise<(MobileIdAuthentication | null)[]> {
    const events = await this.events.log.latestMany(MOBILE_ID_EVENT_KIND, authReqIds, caller);
    const now = this.now();
    return events.map((e) => (e ? authenticationView(e, this.box, now) : null));
  }

  /**
   * The stored notification event at once when there is one, else the live one when it arrives; then the stream
   * ends (an authentication completes once). `authentication(event)` is what it says: the subscription maps each
   * event there, once per event for all its identical subscribers (docs/decisions/030), rather than here once per
   * subscriber (which also costs one suspended generator per waiting subscription). With `resume`: the
   * result only when the cursor does not cover it (it arrived after the cursor, or has not arrived yet); when it does,
   * the result was delivered before and the stream ends at once. Two results for one auth_req_id that the caller may
   * read (one on a shared configured token, one on a token its app issued): the newest, with a cursor or without, as
   * the query reads it (docs/decisions/043: a read takes the newest event the reader may read).
   */
  watch(caller: Caller, authReqId: string, resume?: Resume): AsyncGenerator<EventRecord> {
    checkAuthReqId(authReqId);
    // Another app's result is skipped: the stream waits as it would for an authentication with no result yet.
    return this.events.streams.subscribe({
      kind: MOBILE_ID_EVENT_KIND,
      key: authReqId,
      limit: 1,
      reader: caller,
      ...resume,
      endedWithin: FIRST_RESULT_ENDS,
      newestOnResume: true,
      endAt: caller.expiresAt,
    });
  }

  /** The authentication an event of `watch` records (its tokens opened). */
  authentication(event: EventRecord): MobileIdAuthentication {
    return authenticationView(event, this.box, this.now());
  }

  issueNotificationToken(
    caller: Caller,
    options: { authReqId?: string | null; ttlSeconds?: number | null },
  ): Promise<IssuedToken> {
    return this.tokens.issueChecked(caller, options, this.now());
  }

  /**
   * Sandbox only: the sandbox sends the gateway's own endpoint, over HTTP, the notification the real service
   * would send at the end of authentication `authReqId`, authenticated with a token issued here for it.
   */
  sandboxComplete(caller: Caller, authReqId: string, outcome: SandboxOutcome): Promise<SandboxDelivery> {
    return this.sandbox.complete(caller, authReqId, outcome);
  }

  /** Keeps a refused notification, without secrets, for operators; false when it was only counted. */
  reject(rejection: NewRejection): Promise<boolean> {
    return this.quarantine.record(rejection);
  }

  /** Verifies the pending notifications that are due (docs/decisions/040); see NotificationIntake.verifyPending. */
  verifyPending(now?: number): Promise<{ verified: number; refused: number; waiting: number }> {
    return this.intake.verifyPending(now);
  }

  /** Refused notifications, newest first: all of them for an operator, those on tokens it issued for an app. */
  rejections(caller: Caller, options: { first: number; authReqId?: string | null }): Promise<Rejection[]> {
    return this.quarantine.list(caller, options);
  }

  /** Removes expired access tokens from stored events and expired notification tokens. */
  async purgeExpired(now = this.now()): Promise<{ accessTokens: number; notificationTokens: number }> {
    const accessTokens = await this.events.log.redactExpiredSecrets(
      MOBILE_ID_EVENT_KIND,
      (p, scope) => {
        try {
          return withoutAccessToken(this.box, p as StoredNotification, scope);
        } catch (err) {
          // Sealed under another key (TOKEN_ENCRYPTION_KEY changed): it cannot be sealed again without the token, and
          // no reader can open it either. Left as it is, and not swept again.
          this.logger.warn(
            { authReqId: (p as StoredNotification).authReqId, reason: (err as Error).message },
            'an expired access token could not be removed from its stored notification: it does not open with this key',
          );
          return p;
        }
      },
      now,
    );
    const notificationTokens = await this.tokens.purgeExpired(now);
    await this.quarantine.purge(now);
    await this.pending.purgeOwners();
    return { accessTokens, notificationTokens };
  }
}
