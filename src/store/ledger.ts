import type { Compilable, CompiledQuery, Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';

import type { Execute, ReadValues, Statements } from './index.js';
import { precompiled } from './precompiled.js';
import type { Database } from './schema.js';

/** Every kind of object the gateway remembers. */
export type ResourceKind =
  | 'project'
  | 'network'
  | 'subnet'
  | 'ip_address'
  | 'kafka_cluster'
  | 'kafka_topic'
  | 'kafka_user'
  | 'virtual_machine'
  | 'identification'
  | 'verification';

export interface LedgerRecord {
  id: string;
  kind: ResourceKind;
  projectId: string | null;
  parentId: string | null;
  title: string | null;
  /** The non-secret input the resource was created with. */
  spec: Record<string, unknown>;
  /** The upstream's creation response, secrets removed. */
  response: unknown;
  idempotencyKey: string | null;
  createdBy: string;
  createdAt: Date;
}

type Row = Database['resources'];

/** What an idempotency record keeps of a creation (`Ledger.storedResult`): its record's id, or a copy of it. */
export type StoredResult = { ledger: string } | (Omit<LedgerRecord, 'createdAt'> & { createdAt: string });

/** The columns every read selects, in this order: a row arrives as the array of their values (Store.readValues). */
const COLUMNS = [
  'id',
  'kind',
  'project_id',
  'parent_id',
  'title',
  'spec',
  'response',
  'idempotency_key',
  'created_by',
  'created_at',
] as const;
type Values = {
  readonly [I in keyof typeof COLUMNS]: (typeof COLUMNS)[I] extends keyof Row ? Row[(typeof COLUMNS)[I]] : never;
};

/**
 * A record read from the ledger. `spec` and `response` stay JSON text until first read (then parsed once
 * and kept): a query that reads a few columns of a tree of records never parses the rest (decision 027). The
 * getters sit on the prototype, so a spread copy would drop them: read the fields by name.
 */
class StoredRecord implements LedgerRecord {
  readonly id: string;
  readonly kind: ResourceKind;
  readonly projectId: string | null;
  readonly parentId: string | null;
  readonly title: string | null;
  readonly idempotencyKey: string | null;
  readonly createdBy: string;
  readonly createdAt: Date;
  private specJson: string | null;
  private responseJson: string | null;
  private parsedSpec: Record<string, unknown> | undefined = undefined;
  private parsedResponse: unknown = undefined;

  constructor(values: Values) {
    this.id = values[0];
    this.kind = values[1] as ResourceKind;
    this.projectId = values[2];
    this.parentId = values[3];
    this.title = values[4];
    this.specJson = values[5];
    this.responseJson = values[6];
    this.idempotencyKey = values[7];
    this.createdBy = values[8];
    this.createdAt = new Date(Number(values[9]));
  }

  get spec(): Record<string, unknown> {
    if (this.specJson !== null) {
      this.parsedSpec = JSON.parse(this.specJson) as Record<string, unknown>;
      this.specJson = null;
    }
    return this.parsedSpec!;
  }

  get response(): unknown {
    if (this.responseJson !== null) {
      this.parsedResponse = JSON.parse(this.responseJson) as unknown;
      this.responseJson = null;
    }
    return this.parsedResponse;
  }

  /** What JSON.stringify writes: the record with its parsed fields, as a plain record would be. */
  toJSON(): LedgerRecord {
    return {
      id: this.id,
      kind: this.kind,
      projectId: this.projectId,
      parentId: this.parentId,
      title: this.title,
      spec: this.spec,
      response: this.response,
      idempotencyKey: this.idempotencyKey,
      createdBy: this.createdBy,
      createdAt: this.createdAt,
    };
  }
}

const toRecord = (values: unknown[]): LedgerRecord => new StoredRecord(values as unknown as Values);

/**
 * The ledger: the upstream has no read endpoints, so what the gateway created is answered from here.
 * Every read takes a list of ids so that DataLoader turns one level of a tree into one statement.
 *
 * A stored record never changes (insert only, the first of a replay kept, nothing updated or deleted), so with a
 * `cache` the records it admits are kept, their JSON parsed, once read: a read by id takes them from memory, and a
 * tree level reads only the ids of its rows (from the index alone) and then the records it does not hold yet
 * (docs/decisions/070).
 */
export class Ledger {
  private readonly db: Kysely<Database>;
  private readonly execute: Execute;
  private readonly readValues: ReadValues;
  private readonly cache: RecordCache | null;
  private readonly replayFromLedger: boolean;

  /**
   * `store`: the Store (its `execute` and `readValues` run past kysely's executor on SQLite), or `throughKysely(db)`.
   * `cache`: keep up to `size` records that `keeps` admits (0 or absent: none kept, every read reads every row).
   * `replayFromLedger` (IDEMPOTENCY_REPLAY_FROM_LEDGER, default true): see `storedResult`.
   */
  constructor(options: {
    store: Pick<Statements, 'db' | 'execute' | 'readValues'>;
    cache?: { size: number; keeps: (record: LedgerRecord) => boolean };
    replayFromLedger?: boolean;
  }) {
    ({ db: this.db, execute: this.execute, readValues: this.readValues } = options.store);
    const cache = options.cache;
    this.cache = cache && cache.size > 0 ? new RecordCache(cache.size, cache.keeps) : null;
    this.replayFromLedger = options.replayFromLedger ?? true;
  }

  /**
   * What the idempotency record of a creation keeps for its replay (`replayOf` reads it back): the id of the record,
   * written in the same commit as the key's completion and never changed afterwards (docs/decisions/143). Only for a
   * record whose id is the upstream's own answer to this call: a record the caller names the id of (a verification's
   * external id) may have been recorded first by another call, and the ledger keeps that one. With `replayFromLedger`
   * off, or `copy`, a copy of the record, as before: the spec and the response then stand in both tables.
   */
  storedResult(record: LedgerRecord, copy = !this.replayFromLedger): StoredResult {
    if (!copy) return { ledger: record.id };
    return Object.assign({}, record, { createdAt: record.createdAt.toISOString() });
  }

  /** The record an idempotency record kept (`storedResult`), whichever way it kept it: by id, or as a copy. */
  async replayOf(stored: unknown): Promise<LedgerRecord> {
    const kept = stored as StoredResult;
    if (!('ledger' in kept)) return Object.assign({}, kept, { createdAt: new Date(kept.createdAt) });
    const record = await this.get(kept.ledger);
    if (!record)
      throw new Error(`the idempotency record names resource ${kept.ledger}, which the ledger does not hold`);
    return record;
  }

  /**
   * Stores a created resource. Recording the same id twice (a replay after a crash) keeps the first, as does recording
   * an id the ledger holds for another creation (see `recordWrite`).
   */
  async record(rec: Omit<LedgerRecord, 'createdAt'> & { createdAt?: Date }): Promise<LedgerRecord> {
    // Not a spread with a new key: on Node 20 that makes a hidden class a call (docs/decisions/120).
    const record: LedgerRecord = Object.assign({}, rec, { createdAt: rec.createdAt ?? new Date() });
    await this.execute(this.recordWrite(record));
    return record;
  }

  /**
   * The statement that stores a created resource (as `record` does), not executed: for a caller that commits
   * it together with other writes (the completion of the idempotency record, src/upstream/idempotency.ts). It changes
   * no row when the ledger holds the id for another creation (another idempotency key, or none): the caller, which
   * counts the rows it changed, learns so without another statement.
   */
  recordWrite(rec: LedgerRecord): CompiledQuery {
    return this.insertStatement(
      rec.id,
      rec.kind,
      rec.projectId,
      rec.parentId,
      rec.title,
      JSON.stringify(rec.spec),
      JSON.stringify(rec.response ?? null),
      rec.idempotencyKey,
      rec.createdBy,
      rec.createdAt.getTime(),
    );
  }

  private readonly insertStatement = precompiled(
    (
      id: string,
      kind: string,
      projectId: string | null,
      parentId: string | null,
      title: string | null,
      spec: string,
      response: string,
      idempotencyKey: string | null,
      createdBy: string,
      createdAt: number,
    ) =>
      this.db
        .insertInto('resources')
        .values({
          id,
          kind,
          project_id: projectId,
          parent_id: parentId,
          title,
          spec,
          response,
          idempotency_key: idempotencyKey,
          created_by: createdBy,
          created_at: createdAt,
        })
        // The same id under the same key (a replay after a crash) "updates" the row to itself, so the statement
        // changes a row and the first record is kept; under another key it changes none (see `recordWrite`).
        .onConflict((oc) =>
          oc
            .column('id')
            .doUpdateSet({ id: (eb) => eb.ref('excluded.id') })
            .whereRef('resources.idempotency_key', '=', 'excluded.idempotency_key'),
        ),
  );

  /** The record of `id`, or null when unknown: from memory when kept, without the lists of `getMany`. */
  get(id: string): Promise<LedgerRecord | null> {
    const kept = this.cache?.get(id);
    if (kept) return Promise.resolve(kept);
    return this.byIds([id]).then((byId) => byId.get(id) ?? null);
  }

  /** Records for the ids, in the same order; null where unknown. */
  async getMany(ids: readonly string[]): Promise<(LedgerRecord | null)[]> {
    if (ids.length === 0) return [];
    const byId = await this.byIds([...new Set(ids)]);
    return ids.map((id) => byId.get(id) ?? null);
  }

  /** Children of each parent (of one kind), oldest first, grouped in the order of `parentIds`. */
  childrenOf(kind: ResourceKind, parentIds: readonly string[]): Promise<LedgerRecord[][]> {
    return this.level('parent_id', kind, parentIds);
  }

  /** Resources of one kind directly in each project (networks, Kafka clusters, VMs), oldest first. */
  inProjects(kind: ResourceKind, projectIds: readonly string[]): Promise<LedgerRecord[][]> {
    return this.level('project_id', kind, projectIds);
  }

  /** The records of one kind whose `column` is each of `keys`, oldest first, grouped in the order of `keys`. */
  private async level(
    column: 'parent_id' | 'project_id',
    kind: ResourceKind,
    keys: readonly string[],
  ): Promise<LedgerRecord[][]> {
    if (keys.length === 0) return [];
    const unique = [...new Set(keys)];
    const keyOf = column === 'parent_id' ? (r: LedgerRecord) => r.parentId : (r: LedgerRecord) => r.projectId;
    if (this.cache) {
      // Only the ids, from the index alone and in its order (grouped first, so SQLite sorts nothing); the records
      // from memory, the others in one read by id. A row is never deleted, so each id just read has its record.
      const read = this.read(`${column} ids:${unique.length}`, (k: string, ...values: string[]) =>
        this.db
          .selectFrom('resources')
          .select('id')
          .where('kind', '=', k)
          .where(column, 'in', values)
          .orderBy(column)
          .orderBy('created_at')
          .orderBy('id'),
      );
      const ids = (await this.rows(read(kind, ...unique))).map((values) => values[0] as string);
      const byId = await this.byIds(ids);
      const records: LedgerRecord[] = [];
      for (const id of ids) {
        const record = byId.get(id);
        if (record) records.push(record);
      }
      return groupBy(records, keys, keyOf);
    }
    const read = this.read(`${column}:${unique.length}`, (k: string, ...values: string[]) =>
      this.db
        .selectFrom('resources')
        .select(COLUMNS)
        .where('kind', '=', k)
        .where(column, 'in', values)
        .orderBy('created_at')
        .orderBy('id'),
    );
    return groupBy((await this.rows(read(kind, ...unique))).map(toRecord), keys, keyOf);
  }

  /** The records of distinct ids that exist: those the cache holds, the others read in one statement. */
  private async byIds(ids: string[]): Promise<Map<string, LedgerRecord>> {
    const byId = new Map<string, LedgerRecord>();
    let missing = ids;
    if (this.cache) {
      missing = [];
      for (const id of ids) {
        const record = this.cache.get(id);
        if (record) byId.set(id, record);
        else missing.push(id);
      }
    }
    if (missing.length === 0) return byId;
    const read = this.read(`byId:${missing.length}`, (...idList: string[]) =>
      this.db.selectFrom('resources').select(COLUMNS).where('id', 'in', idList),
    );
    for (const values of await this.rows(read(...missing))) {
      const record = toRecord(values);
      byId.set(record.id, record);
      this.cache?.add(record);
    }
    return byId;
  }

  /** Every record of a kind, newest first. */
  async list(kind: ResourceKind, options: { limit?: number; offset?: number } = {}): Promise<LedgerRecord[]> {
    const rows = await this.rows(this.listStatement(kind, options.limit ?? 100, options.offset ?? 0));
    return rows.map(toRecord);
  }

  private readonly listStatement = precompiled((kind: string, limit: number, offset: number) =>
    this.db
      .selectFrom('resources')
      .select(COLUMNS)
      .where('kind', '=', kind)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .offset(offset),
  );

  /**
   * The read statement of one shape (a method and the length of its id list), compiled once (see
   * precompiled.ts): building and compiling the query tree took a third of what running it on SQLite
   * costs (bench scenario 3). At most MAX_SHAPES are kept; beyond them a read compiles anew.
   */
  private read<A extends string[]>(shape: string, build: (...args: A) => Compilable): (...args: A) => CompiledQuery {
    let statement = this.reads.get(shape) as ((...args: A) => CompiledQuery) | undefined;
    if (!statement) {
      statement = precompiled(build);
      if (this.reads.size < MAX_SHAPES) this.reads.set(shape, statement as (...args: string[]) => CompiledQuery);
    }
    return statement;
  }

  private rows(query: CompiledQuery): Promise<unknown[][]> {
    return this.readValues(query);
  }

  private readonly reads = new Map<string, (...args: string[]) => CompiledQuery>();
}

/** How many read shapes stay compiled; beyond them (id lists of many lengths) a read compiles each time. */
const MAX_SHAPES = 256;

/** Records kept by id, at most `size` of those `keeps` admits, the least recently used dropped first. */
class RecordCache {
  private readonly records: LRUCache<string, LedgerRecord>;

  constructor(
    size: number,
    private readonly keeps: (record: LedgerRecord) => boolean,
  ) {
    this.records = new LRUCache({ max: size });
  }

  get(id: string): LedgerRecord | undefined {
    return this.records.get(id);
  }

  add(record: LedgerRecord): void {
    if (this.keeps(record)) this.records.set(record.id, record);
  }
}

function groupBy<T>(items: T[], keys: readonly string[], keyOf: (item: T) => string | null): T[][] {
  const groups = new Map<string, T[]>(keys.map((k) => [k, []]));
  for (const item of items) {
    const k = keyOf(item);
    if (k !== null) groups.get(k)?.push(item);
  }
  return keys.map((k) => groups.get(k) ?? []);
}
