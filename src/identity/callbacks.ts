import { sql, type Kysely } from 'kysely';

import { sha256 } from '../auth/caller.js';
import { callbackDedupeKey, type EventRecord, type NewEvent } from '../events/index.js';
import { canonicalJson } from '../fingerprint.js';
import type { AppStorage } from '../store/app-storage.js';
import { callsInFlight } from '../store/idempotency.js';
import type { Dialect } from '../store/migrations.js';
import type { Database } from '../store/schema.js';
import { upstreamKey } from '../upstream/idempotency.js';

/** The `meta` mark of a callback event whose payload is `SealedCallback` (events stored before it hold the body in clear). */
const SEALED_META = 'sealedBody';

/** The payload of a callback event stored sealed: the kept body's JSON, sealed under its kind, owner and key. */
interface SealedCallback {
  body: string;
}

/** The associated data of a callback body: its kind, owner and key, as a JSON array (unambiguous; docs/decisions/050). */
function callbackContext(kind: string, scope: string | null, key: string): string {
  return JSON.stringify([kind, 'callback-body', scope, key]);
}

/**
 * What a callback's service answers its route (verification and identification alike), given the address's binding
 * (the route refused an unknown address with 404 before reading anything, looking its token up once): 404 for a body
 * naming what this address may not report on (`not-found`, its description chosen by the service), 503 with Retry-After
 * `not-yet` (what it names may still be being stored: the sender retries), 400 `invalid`, 429 `over-bound` (the app's
 * storage bound: nothing stored), else the event stored, then 204 and `publish`.
 */
export type CallbackReceipt =
  | { status: 'not-found'; description: string }
  | { status: 'not-yet'; description: string; retryAfterSeconds: number }
  | { status: 'invalid'; description: string }
  | { status: 'over-bound'; description: string }
  | { status: 'created' | 'duplicate' | 'conflict'; event: EventRecord; publish: () => Promise<void> };

/** How callback bodies are kept: their size bounded, sealed to their owner, counted against its storage bound. */
export class CallbackBodies {
  /** Bodies opened once per event object: every subscriber of one event reads the same object. */
  private readonly opened = new WeakMap<EventRecord, unknown>();

  constructor(
    private readonly secret: {
      digest(text: string): string;
      seal(plain: string, context: string): string;
      open(sealed: string, context: string): string;
    },
    private readonly storage: AppStorage | null,
    /**
     * Most characters of a body's JSON kept (CALLBACK_BODY_KEPT_BYTES). A larger body (the route reads up to 1 MiB) is
     * kept as what the gateway reads of it (its id, status and event kind) and its size, under `_truncated`: one app's
     * callbacks cannot fill the database, and a read says what was not kept.
     */
    private readonly keptChars: number,
    /** Counts the bodies kept only in part (`gateway_webhook_fields_dropped_total`). */
    private readonly onTruncated: (kind: string) => void = () => {},
  ) {}

  /**
   * The event to append for a callback `body` of `kind` and `key`, owned by `scope`: its dedupe digest is of the whole
   * body (only an exact repeat is a duplicate, decision 041); what is stored is the body, or past `keptChars`
   * `summary()` with `_truncated`, sealed; the owner's storage bound is charged.
   */
  event(o: {
    kind: string;
    key: string;
    scope: string;
    dedupePrefix: string;
    body: unknown;
    summary: () => Record<string, unknown>;
    meta: Record<string, unknown>;
  }): NewEvent {
    const canonical = canonicalJson(o.body) ?? 'null';
    const digest = this.secret.digest(`callback-body\u0000${canonical}`);
    let kept: string;
    if (canonical.length <= this.keptChars) kept = JSON.stringify(o.body);
    else {
      this.onTruncated(o.kind);
      kept = JSON.stringify({ ...o.summary(), _truncated: { bytes: canonical.length, keptBytes: this.keptChars } });
    }
    const payload: SealedCallback = { body: this.secret.seal(kept, callbackContext(o.kind, o.scope, o.key)) };
    const storage = this.storage;
    const scope = o.scope;
    return {
      kind: o.kind,
      key: o.key,
      dedupeKey: callbackDedupeKey(o.dedupePrefix, digest),
      fingerprint: digest,
      payload,
      meta: { ...o.meta, [SEALED_META]: 1 },
      scope,
      ...(storage
        ? {
            charge: storage.charge('events', scope),
          }
        : {}),
    };
  }

  /** The body a callback event holds: opened when sealed (once per event object), as stored when it predates sealing. */
  body(event: EventRecord): unknown {
    if (event.meta[SEALED_META] !== 1) return event.payload;
    if (this.opened.has(event)) return this.opened.get(event);
    const sealed = (event.payload as SealedCallback).body;
    const body = JSON.parse(this.secret.open(sealed, callbackContext(event.kind, event.scope, event.key))) as unknown;
    this.opened.set(event, body);
    return body;
  }
}

export interface CallbackBinding {
  /** The verification the token was issued for; null until the upstream's answer names it. */
  externalId: string | null;
  /** Scope of the caller that registered the verification: its events belong to that API key. */
  createdBy: string;
  /** The stored digest of the address's token, the row `claim` binds. */
  tokenHash: string;
}

/**
 * The first key of the advisory lock a claim takes on PostgreSQL (the second is the hash of the app): a namespace of
 * its own, apart from the event log's append locks and the single-bigint ones (kysely's migration lock). Two apps
 * whose names have one hash only wait for each other's claims.
 */
const CLAIM_LOCK_CLASS = 0x7663626b; // "vcbk"

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
    private readonly dialect: Dialect,
    private readonly secret: { digest(text: string): string },
    /** The gateway's clock (GatewayTesting.clock), on which the idempotency records write their leases. */
    private readonly now: () => number = () => Date.now(),
  ) {}

  /**
   * The token of the registration sent under `upstreamIdempotencyKey`, stored as its hash: a keyed digest
   * (256 bits, base64url) of that key, so it is unguessable without the gateway's secret, and the same on
   * every send of the same registration. A retry (the app's, after an unknown outcome or a failure, on any
   * replica, after a restart) then sends the same body under the same key, which an upstream that honours
   * the key replays instead of refusing as another request. A plan shows where it goes, masked.
   */
  tokenFor(upstreamIdempotencyKey: string): string {
    return Buffer.from(this.secret.digest(`verification-callback\u0000${upstreamIdempotencyKey}`), 'hex').toString(
      'base64url',
    );
  }

  /** Issues (stores the hash of) the token of `upstreamIdempotencyKey` (tokenFor). */
  async issue(
    createdBy: string,
    externalId: string | null,
    upstreamIdempotencyKey: string,
  ): Promise<{ token: string; fresh: boolean }> {
    const token = this.tokenFor(upstreamIdempotencyKey);
    const inserted = await this.db
      .insertInto('verification_callbacks')
      .values({ token_hash: hashOf(token), external_id: externalId, created_by: createdBy, created_at: Date.now() })
      .onConflict((oc) => oc.column('token_hash').doNothing())
      .executeTakeFirst();
    return { token, fresh: Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1 };
  }

  /**
   * Binds the token of a registration of `createdBy` to the external id the upstream's answer assigned (only if it had
   * none), by the rule a callback's `claim` follows, `held` as there: not to an id another verification of the app
   * holds. Such an answer's registration cannot be recorded either when the app's ledger holds the id, and an address
   * bound to it would write the other verification's result. True when the token is now bound to `externalId`.
   */
  bind(
    token: string,
    createdBy: string,
    externalId: string,
    held: { spellings?: readonly string[]; records?: readonly string[] } = {},
  ): Promise<boolean> {
    return this.claim({ tokenHash: hashOf(token), createdBy, externalId: null }, externalId, held);
  }

  /**
   * Binds a token not yet bound (its registration's answer is not stored, or named no readable id) to the external id
   * the first callback on it names, unless another verification of the same app holds that id: another token of the
   * app bound to it, or to one of `held.spellings` (the ids such a token may be bound to: an assigned UUID an earlier
   * release bound in the case the upstream wrote it; by default `externalId` alone), or a verification the app's ledger
   * records under one of `held.records` (one registered without a callback has no token to hold its id). One address
   * reports on one verification only, and never on one that another registration of its app is. Another app's tokens
   * and records are not consulted (their ids are never this app's events, and the answer must not tell what another
   * app holds). True when the token is now bound to `externalId` (also when a concurrent callback or the registration's
   * answer bound it so: that answer binds the token before it records the verification).
   *
   * SQLite runs one write at a time, so the update's check and its write are one step. PostgreSQL (READ COMMITTED)
   * reads the other tokens as of the update's start: two claims of one app for one id on two tokens, each not seeing
   * the other's uncommitted write, would both bind. There the claims of an app take a lock of the app, for the rest of
   * their transaction, before the update: its check then reads what an earlier claim committed. The lock is a statement
   * of its own, because a statement reads as of its own start, which would precede the wait for the lock.
   */
  async claim(
    binding: CallbackBinding,
    externalId: string,
    held: { spellings?: readonly string[]; records?: readonly string[] } = {},
  ): Promise<boolean> {
    const spellings = [...new Set([externalId, ...(held.spellings ?? [])])];
    const records = held.records ?? [];
    const bind = (db: Kysely<Database>) =>
      db
        .updateTable('verification_callbacks')
        .set({ external_id: externalId })
        .where('token_hash', '=', binding.tokenHash)
        .where('external_id', 'is', null)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('verification_callbacks as other')
                .select('other.token_hash')
                .where('other.created_by', '=', binding.createdBy)
                .where('other.external_id', 'in', spellings),
            ),
          ),
        )
        .$if(records.length > 0, (update) =>
          update.where(({ not, exists, selectFrom }) =>
            not(
              exists(
                selectFrom('resources')
                  .select('resources.id')
                  .where('resources.id', 'in', records)
                  .where('resources.kind', '=', 'verification')
                  .where('resources.created_by', '=', binding.createdBy),
              ),
            ),
          ),
        )
        .execute();
    if (this.dialect === 'postgres')
      await this.db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(${sql.lit(CLAIM_LOCK_CLASS)}, hashtext(${binding.createdBy}))`.execute(
          trx,
        );
        await bind(trx);
      });
    else await bind(this.db);
    const row = await this.db
      .selectFrom('verification_callbacks')
      .select('external_id')
      .where('token_hash', '=', binding.tokenHash)
      .executeTakeFirst();
    return row?.external_id === externalId;
  }

  /**
   * True while the registration this address was issued for is in flight (its idempotency record pending, its lease
   * running on the gateway's clock): the service may call back on an address whose registration it has not answered
   * yet, so not yet bound. The token is derived from the registration's upstream key (`tokenFor`), so the app's
   * registrations in flight tell which is the address's; another of them in flight says nothing of this address.
   */
  async registering(binding: CallbackBinding): Promise<boolean> {
    const keys = await callsInFlight(this.db, binding.createdBy, 'registerVerification', this.now());
    return keys.some((key) => hashOf(this.tokenFor(upstreamKey(binding.createdBy, key))) === binding.tokenHash);
  }

  /** Forgets a token whose registration the upstream refused (nothing will call it). */
  async revoke(token: string): Promise<void> {
    await this.db.deleteFrom('verification_callbacks').where('token_hash', '=', hashOf(token)).execute();
  }

  async find(token: string): Promise<CallbackBinding | null> {
    const row = await this.db
      .selectFrom('verification_callbacks')
      .select(['token_hash', 'external_id', 'created_by'])
      .where('token_hash', '=', hashOf(token))
      .executeTakeFirst();
    return row ? { externalId: row.external_id, createdBy: row.created_by, tokenHash: row.token_hash } : null;
  }
}
