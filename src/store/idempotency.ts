import type { CompiledQuery, ExpressionBuilder, Kysely, UpdateQueryBuilder, UpdateResult } from 'kysely';

import type { Execute, Statements } from './index.js';
import { precompiled } from './precompiled.js';
import type { Database } from './schema.js';
import type { WrittenTogether } from './sqlite-dialect.js';

type RecordUpdate = UpdateQueryBuilder<Database, 'idempotency_records', 'idempotency_records', UpdateResult>;

/**
 * Whether a record is over at `now`: its retention passed, and it is not a pending record whose call still holds its
 * lease. A call may outlive the retention (a slow upstream, a short IDEMPOTENCY_RETENTION); its record stays until the
 * call ends or its lease lapses, so that no other call claims its key (sending beside it) and its answer is stored.
 */
function over(eb: ExpressionBuilder<Database, 'idempotency_records'>, now: number) {
  return eb.and([
    eb('idempotency_records.expires_at', '<=', now),
    eb.or([eb('idempotency_records.state', '!=', 'pending'), eb('idempotency_records.lease_until', '<', now)]),
  ]);
}

/**
 * True while a call of `operation` by the app `scope` is in flight: its record pending, its lease running at `now`. An
 * upstream may call back on a creation it has not answered yet (or whose record is not stored yet): such a callback is
 * asked to come again rather than refused.
 */
export async function callInFlight(
  db: Kysely<Database>,
  scope: string,
  operation: string,
  now: number,
): Promise<boolean> {
  const row = await inFlight(db, scope, operation, now).limit(1).executeTakeFirst();
  return row !== undefined;
}

/**
 * The keys of the calls of `operation` by the app `scope` in flight (as `callInFlight` tells one), for a caller that
 * must know which of its calls is: a callback address derived from its call's key.
 */
export async function callsInFlight(
  db: Kysely<Database>,
  scope: string,
  operation: string,
  now: number,
): Promise<string[]> {
  const rows = await inFlight(db, scope, operation, now).execute();
  return rows.map((row) => row.key);
}

/** The keys of `operation`'s calls by `scope` whose lease is live at `now`: pending, and not taken over yet. */
function inFlight(db: Kysely<Database>, scope: string, operation: string, now: number) {
  return db
    .selectFrom('idempotency_records')
    .select('key')
    .where('scope', '=', scope)
    .where('operation', '=', operation)
    .where('state', '=', 'pending')
    .where('lease_until', '>', now);
}

/**
 * Runs `first`, then, if it changed a row, `then`, as one transaction with one commit; false when `first` changed no
 * row, `{ unapplied }` when a statement of `then` changed none (nothing written either way). The store's own
 * (Store.writeTogether) joins the SQLite group commit; without it, a kysely transaction.
 */
export type WriteTogether = (first: CompiledQuery, then: readonly CompiledQuery[]) => Promise<WrittenTogether>;

export interface IdempotencyRecord {
  scope: string;
  key: string;
  operation: string;
  fingerprint: string;
  /**
   * `unknown`: the upstream call's outcome is unknown (UPSTREAM_OUTCOME_UNKNOWN); only the same request may retry it.
   * `incomplete`: the upstream answered 2xx but the gateway could not read the answer (UPSTREAM_ANSWER_INCOMPLETE);
   * `response` holds that answer, and a retry of the same request reads it again instead of sending anything.
   */
  state: 'pending' | 'done' | 'unknown' | 'incomplete';
  response: unknown;
  leaseUntil: number;
  createdAt: number;
  expiresAt: number;
}

export interface ClaimRequest {
  scope: string;
  key: string;
  operation: string;
  fingerprint: string;
  leaseUntil: number;
  expiresAt: number;
}

/** Storage of idempotency records; the rules that use them live in src/upstream/idempotency.ts. */
export class IdempotencyRecords {
  private readonly db: Kysely<Database>;
  private readonly writeTogether: WriteTogether;
  private readonly execute: Execute;
  /** What runs a fresh claim: the store's `executeVisible` when the claim need not wait for its sync, else `execute`. */
  private readonly executeClaim: Execute;

  /**
   * `store`: the Store (on SQLite its `writeTogether` joins the group commit of the turn), or `throughKysely(db)`.
   * `claimWithoutSync` (SQLITE_CLAIM_WITHOUT_SYNC, default true): a fresh claim is settled once committed, without
   * waiting for its WAL sync, where the store offers it (`executeVisible`: SQLite with FULL). See `claimFree`.
   */
  constructor(options: {
    store: Pick<Statements, 'db' | 'writeTogether' | 'execute'> & { executeVisible?: Execute | undefined };
    claimWithoutSync?: boolean;
  }) {
    ({ db: this.db, writeTogether: this.writeTogether, execute: this.execute } = options.store);
    this.executeClaim =
      (options.claimWithoutSync ?? true) && options.store.executeVisible ? options.store.executeVisible : this.execute;
  }

  /** The statements of a fresh claim and of a completion, the two writes of every first call: compiled once. */
  private readonly claimFreeStatement = precompiled(
    (
      scope: string,
      key: string,
      operation: string,
      fingerprint: string,
      leaseUntil: number,
      now: number,
      expiresAt: number,
    ) => {
      const fresh = {
        operation,
        fingerprint,
        state: 'pending' as const,
        response: null,
        lease_until: leaseUntil,
        created_at: now,
        expires_at: expiresAt,
      };
      return this.db
        .insertInto('idempotency_records')
        .values({ scope, key, ...fresh })
        .onConflict((oc) =>
          oc
            .columns(['scope', 'key'])
            .doUpdateSet(fresh)
            .where((eb) => over(eb, now)),
        );
    },
  );

  private readonly completeStatement = precompiled(
    (scope: string, key: string, response: string, expiresAt: number, lease: number) =>
      this.completion(scope, key, response, expiresAt).where('lease_until', '=', lease),
  );

  private completion(scope: string, key: string, response: string, expiresAt: number): RecordUpdate {
    return this.db
      .updateTable('idempotency_records')
      .set({ state: 'done', response, expires_at: expiresAt })
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('state', '=', 'pending');
  }

  async get(scope: string, key: string, now = Date.now()): Promise<IdempotencyRecord | null> {
    const row = await this.db
      .selectFrom('idempotency_records')
      .selectAll()
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where((eb) => eb.not(over(eb, now)))
      .executeTakeFirst();
    if (!row) return null;
    return {
      scope: row.scope,
      key: row.key,
      operation: row.operation,
      fingerprint: row.fingerprint,
      state: row.state,
      response: row.response == null ? null : (JSON.parse(row.response) as unknown),
      leaseUntil: Number(row.lease_until),
      createdAt: Number(row.created_at),
      expiresAt: Number(row.expires_at),
    };
  }

  /**
   * Claims a key nobody holds: inserts the pending record, or replaces one that has expired (an expired
   * record no longer counts). One statement, so a fresh key costs one write. False when a live record
   * exists.
   *
   * With `claimWithoutSync` the claim is settled once committed: every later statement (another request with the
   * same key) sees it, but the upstream call starts before the WAL sync that makes it survive a power loss. Nothing
   * is answered before the completion's sync, which covers the claim too (the WAL is written in order). A claim lost
   * to a power loss costs nothing a retry does not repair: the retry sends the same upstream key (`upstreamKey`),
   * and the cloud upstream answers it with what it created (docs/decisions/078).
   */
  async claimFree(rec: ClaimRequest, now = Date.now()): Promise<boolean> {
    const result = await this.executeClaim(
      this.claimFreeStatement(rec.scope, rec.key, rec.operation, rec.fingerprint, rec.leaseUntil, now, rec.expiresAt),
    );
    return Number(result.numAffectedRows ?? 0n) === 1;
  }

  /**
   * Binds a key nobody holds to a creation whose state is kept elsewhere (a composite provisioning's own record): a
   * record already done, with no answer, so that no other creation claims the key. False when a live record exists.
   */
  async bind(rec: ClaimRequest, now = Date.now()): Promise<boolean> {
    const bound = {
      operation: rec.operation,
      fingerprint: rec.fingerprint,
      state: 'done' as const,
      response: null,
      lease_until: 0,
      created_at: now,
      expires_at: rec.expiresAt,
    };
    const result = await this.db
      .insertInto('idempotency_records')
      .values({ scope: rec.scope, key: rec.key, ...bound })
      .onConflict((oc) =>
        oc
          .columns(['scope', 'key'])
          .doUpdateSet(bound)
          .where((eb) => over(eb, now)),
      )
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  /** Takes over a pending record of the same request whose lease ran out (its request died). */
  takeOver(rec: ClaimRequest, now = Date.now()): Promise<boolean> {
    return this.takeOverWhere(rec, (q) => q.where('lease_until', '<', now).where('expires_at', '>', now));
  }

  /**
   * Takes over a pending record of the same request that still holds one of `leases`: those its own call of this
   * process left when the database went away under it (Idempotency's `lost`), so that nobody else has taken it over.
   */
  async takeOverLost(rec: ClaimRequest, leases: readonly number[]): Promise<boolean> {
    if (leases.length === 0) return false;
    return this.takeOverWhere(rec, (q) => q.where('lease_until', 'in', [...leases]));
  }

  /** Gives a pending record of the same request (scope, key, fingerprint) the new lease, where `lease` allows it. */
  private async takeOverWhere(rec: ClaimRequest, lease: (q: RecordUpdate) => RecordUpdate): Promise<boolean> {
    const takenOver = await lease(
      this.db
        .updateTable('idempotency_records')
        .set({ lease_until: rec.leaseUntil })
        .where('scope', '=', rec.scope)
        .where('key', '=', rec.key)
        .where('state', '=', 'pending')
        .where('fingerprint', '=', rec.fingerprint),
    ).executeTakeFirst();
    return Number(takenOver.numUpdatedRows) === 1;
  }

  /**
   * Extends the lease of a pending record while its call runs. False when the record is no longer this
   * call's to renew: completed, released, or its lease ran out (the process stalled), whether or not another call
   * took it over since. `held`: the leases this call may have left on it (see `complete`).
   */
  async renew(
    scope: string,
    key: string,
    fingerprint: string,
    leaseUntil: number,
    held: readonly number[],
    now = Date.now(),
  ): Promise<boolean> {
    const renewed = await this.db
      .updateTable('idempotency_records')
      .set({ lease_until: leaseUntil })
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('state', '=', 'pending')
      .where('fingerprint', '=', fingerprint)
      .where('lease_until', '>=', now)
      .where('lease_until', 'in', [...held])
      .executeTakeFirst();
    return Number(renewed.numUpdatedRows) === 1;
  }

  /**
   * Marks the record done with its result, if it is still the call's: pending, and holding one of `leases`, those the
   * call may have left on it (its claim's, and each renewal's since the last one acknowledged). False when it is not:
   * the call stalled past its lease and another took the record over, which then is that call's to end; nothing is
   * written. `alongside` are statements that belong to the same result (the ledger record of the created resource):
   * they and the completion are one transaction, one commit, so a crash leaves both or neither, and they are not
   * written when the completion does not apply. Each must change a row: when one changes none (the ledger holds the
   * created id for another creation), nothing is written, the record stays pending, and the answer is `unapplied`.
   * `expiresAt`: the retention counts from the completion, so that an answer stored after a slow call is replayed.
   */
  async complete(
    scope: string,
    key: string,
    response: unknown,
    expiresAt: number,
    leases: readonly number[],
    alongside: readonly CompiledQuery[] = [],
  ): Promise<WrittenTogether> {
    const stored = JSON.stringify(response ?? null);
    // One lease unless a renewal is in flight or its answer was lost: the statement compiled once.
    const completion =
      leases.length === 1
        ? this.completeStatement(scope, key, stored, expiresAt, leases[0]!)
        : this.completion(scope, key, stored, expiresAt)
            .where('lease_until', 'in', [...leases])
            .compile();
    if (alongside.length === 0) return Number((await this.execute(completion)).numAffectedRows ?? 0n) === 1;
    return this.writeTogether(completion, alongside);
  }

  /**
   * Parks a pending key whose call ended without a result to replay, keeping it bound to its request (another request
   * with it is IDEMPOTENCY_KEY_REUSED) with what the next call needs:
   * - `unknown`: the upstream call's outcome is unknown; `stored` describes the failure, and the app's retry sends
   *   the request again (docs/decisions/011);
   * - `incomplete`: the upstream answered 2xx but its answer could not be read; `stored` is that answer (no secrets),
   *   which the retry reads again instead of sending anything (docs/decisions/042).
   * False when the record is no longer the call's (see `complete`, whose `leases` these are): nothing is written.
   * `expiresAt`: as `complete`'s.
   */
  async park(
    scope: string,
    key: string,
    leases: readonly number[],
    state: 'unknown' | 'incomplete',
    stored: unknown,
    expiresAt: number,
  ): Promise<boolean> {
    const parked = await this.db
      .updateTable('idempotency_records')
      .set({ state, lease_until: 0, response: JSON.stringify(stored ?? null), expires_at: expiresAt })
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('state', '=', 'pending')
      .where('lease_until', 'in', [...leases])
      .executeTakeFirst();
    return Number(parked.numUpdatedRows) === 1;
  }

  /** Claims a record parked in `state` (see `park`) for a retry of the same request; false when another took it. */
  async reclaim(rec: ClaimRequest, state: 'unknown' | 'incomplete', now = Date.now()): Promise<boolean> {
    const claimed = await this.db
      .updateTable('idempotency_records')
      .set({ state: 'pending', lease_until: rec.leaseUntil })
      .where('scope', '=', rec.scope)
      .where('key', '=', rec.key)
      .where('state', '=', state)
      .where('fingerprint', '=', rec.fingerprint)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return Number(claimed.numUpdatedRows) === 1;
  }

  /**
   * Gives a pending key back after a failure, so that a later call with the same key runs again. False when the
   * record is no longer the call's (see `complete`, whose `leases` these are): nothing is deleted.
   */
  async release(scope: string, key: string, leases: readonly number[]): Promise<boolean> {
    const released = await this.db
      .deleteFrom('idempotency_records')
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('state', '=', 'pending')
      .where('lease_until', 'in', [...leases])
      .executeTakeFirst();
    return Number(released.numDeletedRows) === 1;
  }

  /**
   * Ends a pending call's lease at once, keeping the record bound to its request: the next call of the same request
   * takes it over (`takeOver`) and sends it again, another request with the key is IDEMPOTENCY_KEY_REUSED. False when
   * the record is no longer the call's (see `complete`, whose `leases` these are): nothing is written. `expiresAt`: as
   * `complete`'s.
   */
  async lapse(scope: string, key: string, leases: readonly number[], expiresAt: number): Promise<boolean> {
    const lapsed = await this.db
      .updateTable('idempotency_records')
      .set({ lease_until: 0, expires_at: expiresAt })
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where('state', '=', 'pending')
      .where('lease_until', 'in', [...leases])
      .executeTakeFirst();
    return Number(lapsed.numUpdatedRows) === 1;
  }

  async purgeExpired(now = Date.now()): Promise<number> {
    const res = await this.db
      .deleteFrom('idempotency_records')
      .where((eb) => over(eb, now))
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
