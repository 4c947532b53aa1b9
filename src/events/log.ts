import { sql, type Kysely } from 'kysely';

import type { Caller } from '../auth/caller.js';
import { readableByInSql } from '../auth/tenancy.js';
import { fingerprint } from '../fingerprint.js';
import type { StorageBoundError, StorageRefusal } from '../store/app-storage.js';
import type { Execute } from '../store/index.js';
import type { Dialect } from '../store/migrations.js';
import { precompiled } from '../store/precompiled.js';
import type { Database } from '../store/schema.js';
import { EVENT_KINDS } from './kinds.js';

export interface EventRecord {
  seq: number;
  /** `mobile-id` or `verification`. */
  kind: string;
  /** What a subscriber asks for: the auth_req_id, or the verification's external id. */
  key: string;
  dedupeKey: string;
  fingerprint: string;
  payload: unknown;
  meta: Record<string, unknown>;
  /** The API-key scope the event belongs to, when known. */
  scope: string | null;
  receivedAt: Date;
  /**
   * Its position in the log as a subscriber receives it (src/events/cursor.ts): set by the bus when it is delivered,
   * or by a stream that replays it from the log.
   */
  cursor?: string;
  /**
   * In memory only, never stored nor sent: what the intake that took this event in sealed its payload from, for this
   * process's live subscribers (DELIVERY_CLEAR_FROM_INTAKE, docs/decisions/062 and 067). Set on the object the intake
   * publishes; an event read from the log or from another replica has none, and its payload is opened as stored.
   */
  clear?: object;
}

export interface NewEvent {
  kind: string;
  key: string;
  /** A second append with the same dedupe key is a duplicate (same payload) or a conflict (another payload). */
  dedupeKey: string;
  payload: unknown;
  meta?: Record<string, unknown>;
  scope?: string | null;
  /**
   * What tells a duplicate from a conflict; defaults to sha256 of the canonical payload. A payload that
   * holds encrypted secrets (random IVs) passes a keyed digest of its clear content instead.
   */
  fingerprint?: string;
  /** When short-lived secrets in the payload expire; `redactExpiredSecrets` removes them then. */
  secretsExpireAt?: number | null;
  /**
   * The caller's `payload` and `meta` are plain JSON data (what their JSON parses back to, key for key) that nothing
   * changes after the append: the created record carries them as they are, rather than their JSON parsed back
   * (the mobile-ID intake, DELIVERY_PAYLOAD_FROM_INTAKE; docs/decisions/097). The row stored is the same.
   */
  asGiven?: boolean;
  /**
   * Counts the event against its owner's storage bound before it is written (a webhook on an app's credentials,
   * src/store/app-storage.ts): past the bound it is not written, and the append throws StorageBoundError (a repeat of
   * a stored event is still its duplicate or conflict).
   */
  charge?: StorageCharge;
}

/** One owner's storage bound as an append sees it: the characters of the row's JSON are taken, or refused. */
export interface StorageCharge {
  take(chars: number): StorageRefusal | null;
  /** Counts a refusal that stands (nothing of the same dedupe key was stored); the error to throw. */
  refused(refusal: StorageRefusal): StorageBoundError;
  /** Gives back what was taken for a row that was not written (a duplicate or a conflict). */
  refund(chars: number): void;
}

export type AppendResult =
  | { status: 'created'; event: EventRecord }
  | { status: 'duplicate'; event: EventRecord }
  | { status: 'conflict'; event: EventRecord };

/*
 * The dedupe key of every kind of event, in one place. The log refuses a second row with the same kind, key and
 * dedupe key (one unique index, docs/decisions/079); that refuses every second row with the same dedupe key only
 * because each form names its kind (its prefix, one per kind) and its key, and splits one way only: an owner scope
 * holds no `:` after its fixed prefix (src/auth/caller.ts scopeOfApp), a digest is hex and a revision is digits, so
 * the key is what lies between them. test/events/dedupe-key-forms.test.ts holds each form to that.
 */

/**
 * The kinds' names, copied once at load: building a key then calls nothing in another module (vitest's imports are
 * getters, so test/events/event-path-files.test.ts would count kinds.ts on the webhook's path).
 */
const KIND = { ...EVENT_KINDS };

/**
 * A mobile-ID notification's, with the auth_req_id as key: per owner of the token that carried it. A shared
 * (configured, unbound) token keeps the key it always had, so a repeat of a notification stored before owners were
 * told apart is still recognised.
 */
export function mobileIdDedupeKey(scope: string | null, authReqId: string): string {
  return scope === null ? `${KIND.mobileId}:${authReqId}` : `${KIND.mobileId}@${scope}:${authReqId}`;
}

/** What a verification callback's dedupe key starts with, its external id as key (then `callbackDedupeKey`). */
export function verificationDedupePrefix(owner: string, externalId: string): string {
  return `${KIND.verification}@${owner}:${externalId}`;
}

/** What an identification callback's dedupe key starts with, its id as key (then `callbackDedupeKey`). */
export function identificationDedupePrefix(id: string): string {
  return `${KIND.identification}:${id}`;
}

/** A callback's dedupe key: its prefix and the hex digest of its body (only an exact repeat is the same delivery). */
export function callbackDedupeKey(prefix: string, digest: string): string {
  return `${prefix}:${digest}`;
}

/** A state of a provisioning, its id as key: one event per revision. */
export function provisioningDedupeKey(id: string, revision: number): string {
  return `${KIND.provisioning}/${id}/${revision}`;
}

type Row = Database['events'];

/**
 * The first key of the advisory locks an append takes on PostgreSQL (the second is the hash of its dedupe key): a
 * namespace of its own, apart from the single-bigint locks (kysely's migration lock). Two dedupe keys with one hash
 * only wait for each other.
 */
const APPEND_LOCK_CLASS = 0x65766e74; // "evnt"
/**
 * A limit as a literal, written into a statement's text rather than bound as a parameter: with SQLite as
 * better-sqlite3 12 bundles it, a read whose LIMIT is bound costs several times the same read with a literal
 * (docs/decisions/069 has the figures). A whole number, so nothing but digits reaches the statement's text.
 */
function whole(n: number): number {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`a limit is a whole number, not ${n}`);
  return n;
}

/** How many times an append that found neither room nor a stored event waits for the other append of its key. */
const APPEND_ATTEMPTS = 3;

function toRecord(row: Row & { seq: number }): EventRecord {
  return {
    seq: Number(row.seq),
    kind: row.kind,
    key: row.key,
    dedupeKey: row.dedupe_key,
    fingerprint: row.fingerprint,
    payload: JSON.parse(row.payload) as unknown,
    meta: JSON.parse(row.meta) as Record<string, unknown>,
    scope: row.scope,
    receivedAt: new Date(Number(row.received_at)),
  };
}

/**
 * The durable event log: a webhook is appended here (and committed) before it is acknowledged, so a crash
 * after the acknowledgement loses nothing, and a subscriber that comes late reads it from here.
 */
export class EventLog {
  /**
   * `INSERT … ON CONFLICT (kind, key, dedupe_key) DO NOTHING`, built and compiled once (bench scenario 4), with
   * `RETURNING seq` on PostgreSQL; on SQLite the new row's seq is the insert's rowid.
   * The conflict target is the table's one unique index; a dedupe key names its kind and key
   * (the dedupe keys above), so it refuses what a unique dedupe key alone would (docs/decisions/079).
   *
   * On PostgreSQL a `bigserial` value is taken for every row that reaches the insert, so a duplicate that reached
   * it would burn a number, and every other replica would look for it for a minute (src/events/postgres-bus.ts).
   * The row is therefore made only when no event holds its dedupe key (`NOT EXISTS`) and no other append of that
   * key is under way: the append takes a transaction-scoped advisory lock on the key (`pg_try_advisory_xact_lock`,
   * released at its commit), and a copy that cannot take it inserts nothing and waits for the first to end (see
   * `append`). A copy whose snapshot predates the first's commit by microseconds can still reach the insert; the
   * conflict clause keeps it from storing a second row. docs/decisions/054.
   */
  private readonly insertStatement = precompiled(
    (
      kind: string,
      key: string,
      dedupeKey: string,
      print: string,
      payload: string,
      meta: string,
      scope: string | null,
      receivedAt: number,
      expiresAt: number,
      secretsExpireAt: number | null,
    ) => {
      const into = this.db.insertInto('events');
      const row =
        this.dialect === 'postgres'
          ? into
              .columns([
                'kind',
                'key',
                'dedupe_key',
                'fingerprint',
                'payload',
                'meta',
                'scope',
                'received_at',
                'expires_at',
                'secrets_expire_at',
              ])
              .expression(
                this.db
                  .selectNoFrom([
                    sql<string>`${kind}::text`.as('kind'),
                    sql<string>`${key}::text`.as('key'),
                    sql<string>`${dedupeKey}::text`.as('dedupe_key'),
                    sql<string>`${print}::text`.as('fingerprint'),
                    sql<string>`${payload}::text`.as('payload'),
                    sql<string>`${meta}::text`.as('meta'),
                    sql<string | null>`${scope}::text`.as('scope'),
                    sql<number>`${receivedAt}::bigint`.as('received_at'),
                    sql<number>`${expiresAt}::bigint`.as('expires_at'),
                    sql<number | null>`${secretsExpireAt}::bigint`.as('secrets_expire_at'),
                  ])
                  .where(({ and, not, exists, selectFrom }) =>
                    and([
                      not(
                        exists(
                          selectFrom('events')
                            .select(sql.lit(1).as('one'))
                            .where('kind', '=', kind)
                            .where('key', '=', key)
                            .where('dedupe_key', '=', dedupeKey),
                        ),
                      ),
                      sql<boolean>`pg_try_advisory_xact_lock(${sql.lit(APPEND_LOCK_CLASS)}, hashtext(${dedupeKey}))`,
                    ]),
                  ),
              )
          : into.values({
              kind,
              key,
              dedupe_key: dedupeKey,
              fingerprint: print,
              payload,
              meta,
              scope,
              received_at: receivedAt,
              expires_at: expiresAt,
              secrets_expire_at: secretsExpireAt,
            });
      const once = row.onConflict((oc) => oc.columns(['kind', 'key', 'dedupe_key']).doNothing());
      // SQLite: the row's seq is its rowid, which the driver reports with the one row changed. RETURNING would keep
      // the returned row in a temporary b-tree made and dropped for each insert, ~10 µs (docs/decisions/117).
      return this.dialect === 'postgres' ? once.returning('seq') : once;
    },
  );

  /**
   * The newest event of a kind for a key, built and compiled once: every subscription on one key reads it when it
   * starts (the stored event first), so a graphql-ws subscribe made kysely build the query each time (bench
   * scenarios 5 and 7). The row whose `seq` is the key's largest, found in the unique index (kind, key, dedupe_key),
   * which holds each row's `seq` on SQLite (the rowid): `ORDER BY seq DESC LIMIT 1` gave the same row, but SQLite
   * sorted the key's rows in a temporary b-tree made and dropped for each read, ~1–2 µs (docs/decisions/117).
   */
  private readonly latestStatement = precompiled((kind: string, key: string) => this.newest(kind, key));

  /** The same, among the events one reader may read: its own scope's and the shared ones (src/auth/tenancy.ts). */
  private readonly latestReadableStatement = precompiled((kind: string, key: string, scope: string) =>
    this.newest(kind, key, { scope }),
  );

  /** The query of both statements above: `reader` narrows it to the events that reader may read. */
  private newest(kind: string, key: string, reader?: Pick<Caller, 'scope'>) {
    return this.db
      .selectFrom('events')
      .selectAll()
      .where('seq', '=', (eb) => {
        const ofKey = eb
          .selectFrom('events')
          .select((m) => m.fn.max('seq').as('seq'))
          .where('kind', '=', kind)
          .where('key', '=', key);
        return reader === undefined ? ofKey : ofKey.where((r) => readableByInSql(r, 'scope', reader));
      });
  }

  /** The event under a dedupe key, through the table's unique index (kind, key, dedupe_key). */
  private readonly byDedupeKeyStatement = precompiled((kind: string, key: string, dedupeKey: string) =>
    this.db
      .selectFrom('events')
      .selectAll()
      .where('kind', '=', kind)
      .where('key', '=', key)
      .where('dedupe_key', '=', dedupeKey),
  );

  /** The purge's watermark (`purgedThrough`): its one row, by primary key. */
  private readonly purgedThroughStatement = precompiled(() =>
    this.db.selectFrom('event_purge').select('through_seq').where('id', '=', sql.lit(1)),
  );

  constructor(
    private readonly db: Kysely<Database>,
    /** EVENT_RETENTION: how long an event is kept (and so how old a cursor may be). */
    readonly retentionMs: number,
    private readonly dialect: Dialect,
    /**
     * How the append's insert and the newest-event reads run: the Store's `execute` (on SQLite straight to the
     * driver, past kysely's executor); `db.executeQuery` by default, as for a log over a transaction.
     */
    private readonly execute: Execute = (query) => db.executeQuery(query),
  ) {}

  async append(e: NewEvent, now = Date.now()): Promise<AppendResult> {
    const print = e.fingerprint ?? fingerprint(e.payload);
    const payload = JSON.stringify(e.payload);
    const meta = JSON.stringify(e.meta ?? {});
    const scope = e.scope ?? null;
    const chars = payload.length + meta.length;
    if (e.charge) {
      const refusal = e.charge.take(chars);
      if (refusal) {
        // A repeat of what is stored is still a duplicate (or a conflict), whatever the bound.
        const known = await this.byDedupeKey(e.kind, e.key, e.dedupeKey);
        if (known) return { status: known.fingerprint === print ? 'duplicate' : 'conflict', event: known };
        throw e.charge.refused(refusal);
      }
    }
    const insert = this.insertStatement(
      e.kind,
      e.key,
      e.dedupeKey,
      print,
      payload,
      meta,
      scope,
      now,
      now + this.retentionMs,
      e.secretsExpireAt ?? null,
    );
    try {
      for (let attempt = 1; ; attempt++) {
        const result = await this.execute<{ seq: number | string }>(insert);
        const seq = result.rows[0]?.seq ?? (result.numAffectedRows === 1n ? result.insertId : undefined);
        if (seq !== undefined) {
          // The record is built from what was written: reading the row back would return the same values.
          const event: EventRecord = {
            seq: Number(seq),
            kind: e.kind,
            key: e.key,
            dedupeKey: e.dedupeKey,
            fingerprint: print,
            payload: e.asGiven ? e.payload : (JSON.parse(payload) as unknown),
            meta: e.asGiven ? (e.meta ?? {}) : (JSON.parse(meta) as Record<string, unknown>),
            scope,
            receivedAt: new Date(now),
          };
          return { status: 'created', event };
        }
        const event = await this.byDedupeKey(e.kind, e.key, e.dedupeKey);
        if (event) {
          e.charge?.refund(chars);
          return { status: event.fingerprint === print ? 'duplicate' : 'conflict', event };
        }
        // PostgreSQL: another append of this key holds its lock and has not committed. Wait until its transaction
        // ends (the lock is taken and released at once), then look again: it committed (a duplicate or a conflict)
        // or rolled back (this one inserts).
        if (this.dialect !== 'postgres' || attempt >= APPEND_ATTEMPTS)
          throw new Error(`event ${e.dedupeKey} was neither inserted nor found`);
        await sql`select pg_advisory_xact_lock(${sql.lit(APPEND_LOCK_CLASS)}, hashtext(${e.dedupeKey}))`.execute(
          this.db,
        );
      }
    } catch (err) {
      // Nothing was written (the store failed, or the row was neither inserted nor found): what was counted against
      // the owner's bound is given back, so that a store's fault uses up nothing of it.
      e.charge?.refund(chars);
      throw err;
    }
  }

  /**
   * The newest event of a kind for a key, or null; with `reader`, the newest that reader may read (another app's
   * event for the same key neither shows nor hides the reader's own).
   */
  async latest(kind: string, key: string, reader?: Caller): Promise<EventRecord | null> {
    const statement =
      reader === undefined ? this.latestStatement(kind, key) : this.latestReadableStatement(kind, key, reader.scope);
    const { rows } = await this.execute<Row & { seq: number }>(statement);
    const row = rows[0];
    return row ? toRecord(row) : null;
  }

  /** Newest event per key (the newest `reader` may read, when given), for a batch of keys (DataLoader), in the order of `keys`. */
  async latestMany(kind: string, keys: readonly string[], reader?: Caller): Promise<(EventRecord | null)[]> {
    if (keys.length === 0) return [];
    let query = this.db
      .selectFrom('events')
      .selectAll()
      .where('kind', '=', kind)
      .where('key', 'in', [...new Set(keys)]);
    if (reader !== undefined) query = query.where((eb) => readableByInSql(eb, 'scope', reader));
    const rows = await query.orderBy('seq', 'asc').execute();
    const byKey = new Map<string, EventRecord>();
    for (const row of rows) byKey.set(row.key, toRecord(row as Row & { seq: number }));
    return keys.map((k) => byKey.get(k) ?? null);
  }

  /**
   * The event of a kind and key stored under a dedupe key, or null. A dedupe key names its kind and key
   * (the dedupe keys above): the two are asked so that the read goes through the table's unique index.
   */
  async byDedupeKey(kind: string, key: string, dedupeKey: string): Promise<EventRecord | null> {
    const { rows } = await this.execute<Row & { seq: number }>(this.byDedupeKeyStatement(kind, key, dedupeKey));
    const row = rows[0];
    return row ? toRecord(row) : null;
  }

  /** Events appended after `seq`, oldest first (a replica catching up after its LISTEN connection dropped). */
  async after(seq: number, limit = 1000): Promise<EventRecord[]> {
    const rows = await this.db
      .selectFrom('events')
      .selectAll()
      .where('seq', '>', seq)
      .orderBy('seq')
      .limit(sql.lit(whole(limit)))
      .execute();
    return rows.map((row) => toRecord(row as Row & { seq: number }));
  }

  /**
   * Events of these kinds with `from < seq <= to`, oldest first, at most `limit`: of one key when given, and of one
   * owner scope (`scope`) or readable by `reader` (its scope's and the shared ones, src/auth/tenancy.ts). What a resumed
   * stream replays (src/events/stream.ts) and what an agent reads after its cursor (src/events/cursor-read.ts).
   */
  async range(
    kinds: readonly string[],
    from: number,
    to: number,
    only: { key?: string; scope?: string; reader?: Caller },
    limit: number,
  ): Promise<EventRecord[]> {
    if (kinds.length === 0 || to <= from) return [];
    let query = this.db
      .selectFrom('events')
      .selectAll()
      .where('seq', '>', from)
      .where('seq', '<=', to)
      .where('kind', 'in', [...kinds]);
    if (only.key !== undefined) query = query.where('key', '=', only.key);
    // One owner's events, never the shared ones (not readableByInSql, src/auth/tenancy.ts): StreamOptions.scope.
    if (only.scope !== undefined) query = query.where('scope', '=', only.scope);
    const reader = only.reader;
    if (reader !== undefined) query = query.where((eb) => readableByInSql(eb, 'scope', reader));
    const rows = await query
      .orderBy('seq')
      .limit(sql.lit(whole(limit)))
      .execute();
    return rows.map((row) => toRecord(row as Row & { seq: number }));
  }

  /**
   * The events whose sequence numbers lie in these stretches (each `[from, to]`, both included, disjoint), oldest
   * first, at most `limit`. One statement whatever the stretches span: each stretch is one index range probe (a
   * stretch of 10,000 burnt numbers costs what a stretch of one does), taken in a lateral subquery so that PostgreSQL
   * cannot plan it as a join that reads the whole log once per stretch (decision 109). PostgreSQL only (the replicas'
   * catch-up); the stretches travel as two arrays, so the statement's text and its parameters do not grow with their
   * number either.
   */
  async inStretches(stretches: ReadonlyArray<readonly [number, number]>, limit = 1000): Promise<EventRecord[]> {
    if (stretches.length === 0) return [];
    const from = stretches.map((s) => s[0]);
    const to = stretches.map((s) => s[1]);
    const most = sql.lit(whole(limit));
    const { rows } = await sql<
      Row & { seq: number }
    >`select e.* from unnest(${from}::bigint[], ${to}::bigint[]) as r("from", "to")
      cross join lateral (select * from events where seq between r."from" and r."to" order by seq limit ${most}) as e
      order by e.seq limit ${most}`.execute(this.db);
    return rows.map(toRecord);
  }

  /**
   * The lowest number in these stretches (each `[from, to]`, both included, ascending and disjoint) that holds an
   * event, or null. What a replica publishing its own events asks while a lower number is not delivered
   * (src/events/postgres-bus.ts: one probe per event, or one for a group, whose events below this number are delivered
   * at once and those above it wait for a catch-up). One statement whatever the stretches span: each stretch is one
   * index range probe that stops at its first event. (An `or` of ranges under `order by seq limit 1` is planned as a
   * walk of the whole index from its lowest number, the ranges a filter: every event the log holds read once per probe
   * that finds nothing.)
   */
  async lowestIn(stretches: ReadonlyArray<readonly [number, number]>): Promise<number | null> {
    if (stretches.length === 0) return null;
    const from = stretches.map((s) => s[0]);
    const to = stretches.map((s) => s[1]);
    const { rows } = await sql<{ seq: number | string | null }>`select min(x.seq) as seq
      from unnest(${from}::bigint[], ${to}::bigint[]) as r("from", "to")
      cross join lateral (select seq from events where seq between r."from" and r."to" order by seq limit 1) as x`.execute(
      this.db,
    );
    const seq = rows[0]?.seq;
    return seq === null || seq === undefined ? null : Number(seq);
  }

  /** The numbers of the newest `limit` events, ascending. */
  async newestSeqs(limit: number): Promise<number[]> {
    const rows = await this.db
      .selectFrom('events')
      .select('seq')
      .orderBy('seq', 'desc')
      .limit(sql.lit(whole(limit)))
      .execute();
    return rows.map((row) => Number(row.seq)).reverse();
  }

  /** The highest sequence number in the log (0 when empty). */
  async lastSeq(): Promise<number> {
    const row = await this.db
      .selectFrom('events')
      .select((eb) => eb.fn.max('seq').as('max'))
      .executeTakeFirst();
    return Number(row?.max ?? 0);
  }

  /**
   * Rewrites, with `redact`, the payload of every event of `kind` whose secrets have expired (e.g. an
   * access token past its expires_in); returns how many were rewritten. `redact` is given the event's owner scope
   * too (a sealed value's context names it), and is not called for the event again.
   */
  async redactExpiredSecrets(
    kind: string,
    redact: (payload: unknown, scope: string | null) => unknown,
    now = Date.now(),
    batchSize = 500,
  ): Promise<number> {
    let total = 0;
    for (;;) {
      const rows = await this.db
        .selectFrom('events')
        .select(['seq', 'payload', 'scope'])
        .where('kind', '=', kind)
        .where('secrets_expire_at', '<=', now)
        .orderBy('secrets_expire_at')
        .limit(sql.lit(whole(batchSize)))
        .execute();
      for (const row of rows) {
        await this.db
          .updateTable('events')
          .set({ payload: JSON.stringify(redact(JSON.parse(row.payload), row.scope)), secrets_expire_at: null })
          .where('seq', '=', row.seq)
          .execute();
      }
      total += rows.length;
      if (rows.length < batchSize) return total;
    }
  }

  /**
   * Deletes the events past their retention, and first raises the purge's watermark (`purgedThrough`) to the highest
   * number it deletes. With `removed`, first tells it, per owner, how many events of its kinds go and their characters
   * (one grouped read of the expired range, by index), so storage bounds give them back.
   */
  async purgeExpired(
    now = Date.now(),
    removed?: { kinds: readonly string[]; release(scope: string, rows: number, chars: number): void },
  ): Promise<number> {
    const highest = await this.db
      .selectFrom('events')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .where('expires_at', '<=', now)
      .executeTakeFirst();
    if (highest?.seq === null || highest?.seq === undefined) return 0;
    // What goes is what expired up to this number: an event stored meanwhile (on a replica whose retention or clock
    // puts its expiry at once) waits for the next run, and is neither released nor deleted past the watermark.
    const through = Number(highest.seq);
    if (removed && removed.kinds.length) {
      const groups = await this.db
        .selectFrom('events')
        .select([
          'scope',
          (eb) => eb.fn.countAll<number>().as('n'),
          sql<number>`coalesce(sum(length(payload) + length(meta)), 0)`.as('chars'),
        ])
        .where('expires_at', '<=', now)
        .where('seq', '<=', through)
        .where('scope', 'is not', null)
        .where('kind', 'in', [...removed.kinds])
        .groupBy('scope')
        .execute();
      for (const g of groups) if (g.scope !== null) removed.release(g.scope, Number(g.n), Number(g.chars));
    }
    // The watermark is raised before anything is deleted: a replica that reads it never finds an event gone whose
    // number lies above it, so a cursor it accepts has lost nothing (src/events/replay.ts). It only grows.
    await this.db
      .updateTable('event_purge')
      .set({ through_seq: through })
      .where('id', '=', 1)
      .where('through_seq', '<', through)
      .execute();
    const res = await this.db
      .deleteFrom('events')
      .where('expires_at', '<=', now)
      .where('seq', '<=', through)
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  }

  /**
   * The highest sequence number the retention purge has deleted, on any replica (0: none): a cursor below it may have
   * lost events after it, whatever its date. One read of one row, made for each resume from a cursor, never per event.
   */
  async purgedThrough(): Promise<number> {
    const { rows } = await this.execute<{ through_seq: number | string }>(this.purgedThroughStatement());
    return Number(rows[0]?.through_seq ?? 0);
  }
}
