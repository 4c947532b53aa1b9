import type { Kysely } from 'kysely';
import type { Caller } from '../caller.js';
import type { Database } from '../store/schema.js';
import { fingerprint } from '../fingerprint.js';
import { precompiled } from '../store/precompiled.js';

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
}

export type AppendResult =
  | { status: 'created'; event: EventRecord }
  | { status: 'duplicate'; event: EventRecord }
  | { status: 'conflict'; event: EventRecord };

type Row = Database['events'];

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
  /** `INSERT … ON CONFLICT (dedupe_key) DO NOTHING RETURNING seq`, built and compiled once (bench scenario 4). */
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
    ) =>
      this.db
        .insertInto('events')
        .values({
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
        })
        .onConflict((oc) => oc.column('dedupe_key').doNothing())
        .returning('seq'),
  );

  /**
   * The newest event of a kind for a key, built and compiled once: every subscription on one key reads it when it
   * starts (the stored event first), so a graphql-ws subscribe made kysely build the query each time (bench
   * scenarios 5 and 7).
   */
  private readonly latestStatement = precompiled((kind: string, key: string) =>
    this.db.selectFrom('events').selectAll().where('kind', '=', kind).where('key', '=', key).orderBy('seq', 'desc').limit(1),
  );

  /** The same, among the events one reader may read: its own scope's and the shared ones (src/tenancy.ts). */
  private readonly latestReadableStatement = precompiled((kind: string, key: string, scope: string) =>
    this.db
      .selectFrom('events')
      .selectAll()
      .where('kind', '=', kind)
      .where('key', '=', key)
      .where((eb) => eb.or([eb('scope', '=', scope), eb('scope', 'is', null)]))
      .orderBy('seq', 'desc')
      .limit(1),
  );

  constructor(
    private readonly db: Kysely<Database>,
    private readonly retentionMs: number,
  ) {}

  async append(e: NewEvent, now = Date.now()): Promise<AppendResult> {
    const print = e.fingerprint ?? fingerprint(e.payload);
    const payload = JSON.stringify(e.payload);
    const meta = JSON.stringify(e.meta ?? {});
    const scope = e.scope ?? null;
    const { rows } = await this.db.executeQuery<{ seq: number | string }>(
      this.insertStatement(e.kind, e.key, e.dedupeKey, print, payload, meta, scope, now, now + this.retentionMs, e.secretsExpireAt ?? null),
    );
    const inserted = rows[0];
    if (inserted) {
      // The record is built from what was written: reading the row back would return the same values.
      const event: EventRecord = {
        seq: Number(inserted.seq),
        kind: e.kind,
        key: e.key,
        dedupeKey: e.dedupeKey,
        fingerprint: print,
        payload: JSON.parse(payload) as unknown,
        meta: JSON.parse(meta) as Record<string, unknown>,
        scope,
        receivedAt: new Date(now),
      };
      return { status: 'created', event };
    }
    const event = await this.byDedupeKey(e.dedupeKey);
    if (!event) throw new Error(`event ${e.dedupeKey} was neither inserted nor found`);
    return { status: event.fingerprint === print ? 'duplicate' : 'conflict', event };
  }

  /**
   * The newest event of a kind for a key, or null; with `reader`, the newest that reader may read (another app's
   * event for the same key neither shows nor hides the reader's own).
   */
  async latest(kind: string, key: string, reader?: Caller): Promise<EventRecord | null> {
    const statement = reader === undefined ? this.latestStatement(kind, key) : this.latestReadableStatement(kind, key, reader.scope);
    const { rows } = await this.db.executeQuery<Row & { seq: number }>(statement);
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
    if (reader !== undefined) query = query.where((eb) => eb.or([eb('scope', '=', reader.scope), eb('scope', 'is', null)]));
    const rows = await query.orderBy('seq', 'asc').execute();
    const byKey = new Map<string, EventRecord>();
    for (const row of rows) byKey.set(row.key, toRecord(row as Row & { seq: number }));
    return keys.map((k) => byKey.get(k) ?? null);
  }

  /** The event stored under a dedupe key, or null. */
  async byDedupeKey(dedupeKey: string): Promise<EventRecord | null> {
    const row = await this.db.selectFrom('events').selectAll().where('dedupe_key', '=', dedupeKey).executeTakeFirst();
    return row ? toRecord(row as Row & { seq: number }) : null;
  }

  /** Events appended after `seq`, oldest first (a replica catching up after its LISTEN connection dropped). */
  async after(seq: number, limit = 1000): Promise<EventRecord[]> {
    const rows = await this.db.selectFrom('events').selectAll().where('seq', '>', seq).orderBy('seq').limit(limit).execute();
    return rows.map((row) => toRecord(row as Row & { seq: number }));
  }

  /** The events with these sequence numbers that exist, oldest first. */
  async bySeqs(seqs: readonly number[]): Promise<EventRecord[]> {
    if (seqs.length === 0) return [];
    const rows = await this.db.selectFrom('events').selectAll().where('seq', 'in', [...seqs]).orderBy('seq').execute();
    return rows.map((row) => toRecord(row as Row & { seq: number }));
  }

  /** The highest sequence number in the log (0 when empty). */
  async lastSeq(): Promise<number> {
    const row = await this.db.selectFrom('events').select((eb) => eb.fn.max('seq').as('max')).executeTakeFirst();
    return Number(row?.max ?? 0);
  }

  /**
   * Rewrites, with `redact`, the payload of every event of `kind` whose secrets have expired (e.g. an
   * access token past its expires_in); returns how many were rewritten.
   */
  async redactExpiredSecrets(kind: string, redact: (payload: unknown) => unknown, now = Date.now(), batchSize = 500): Promise<number> {
    let total = 0;
    for (;;) {
      const rows = await this.db
        .selectFrom('events')
        .select(['seq', 'payload'])
        .where('kind', '=', kind)
        .where('secrets_expire_at', '<=', now)
        .orderBy('secrets_expire_at')
        .limit(batchSize)
        .execute();
      for (const row of rows) {
        await this.db
          .updateTable('events')
          .set({ payload: JSON.stringify(redact(JSON.parse(row.payload))), secrets_expire_at: null })
          .where('seq', '=', row.seq)
          .execute();
      }
      total += rows.length;
      if (rows.length < batchSize) return total;
    }
  }

  async purgeExpired(now = Date.now()): Promise<number> {
    const res = await this.db.deleteFrom('events').where('expires_at', '<=', now).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
