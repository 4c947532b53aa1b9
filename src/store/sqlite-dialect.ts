import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import type BetterSqlite3 from 'better-sqlite3';
import {
  CompiledQuery,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from 'kysely';

import { StoreUnavailableError } from '../errors.js';
import type { CheckpointReply, CheckpointRequest, CheckpointWorkerData } from './checkpoint-worker.js';

/**
 * SQLite's answers when its file cannot be written or read now, whatever the statement: the disk is full
 * (SQLITE_FULL), the file or its directory became read-only (SQLITE_READONLY_*), a write or read failed at the system
 * call (SQLITE_IOERR_*: EIO, EFBIG past a file-size limit, ENOSPC on some paths), the file cannot be opened
 * (SQLITE_CANTOPEN). Each is the operator's to cure, and a retry once it is cured runs the statement again: the
 * transaction did not commit.
 */
const UNWRITABLE = /^SQLITE_(FULL|READONLY|IOERR|CANTOPEN)(_|$)/;

/**
 * SERVICE_UNAVAILABLE for an error that says the database file cannot be written or read now (the same class as
 * PostgreSQL away, docs/contract.md), else `err` itself: the seam where SQLite's failures meet the gateway's.
 */
export function sqliteUnavailable(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNWRITABLE.test(code) ? new StoreUnavailableError(err) : err;
}

/**
 * What a unit of statements written together did (Store.writeTogether): true, all written; false, its first statement
 * changed no row; `unapplied`, the index of a following statement that changed no row. Written only when true.
 */
export type WrittenTogether = boolean | { unapplied: number };

const rejectUnavailable = (err: unknown): Promise<never> => Promise.reject(sqliteUnavailable(err));

/**
 * kysely's SQLite dialect over one better-sqlite3 connection, with two changes that matter under load
 * (docs/decisions/006, whose Measurements keep the figures):
 *
 * - Prepared statements are kept by SQL text (bounded LRU) instead of being prepared for every query.
 *
 * - Group commit. A write outside an explicit transaction does not commit on its own: the first one
 *   in a turn of the event loop opens a transaction, every statement of that turn joins it, and one
 *   COMMIT at the end of the turn (setImmediate) makes them durable together. Each statement's promise
 *   settles only after that COMMIT has returned, so a caller still never sees a write (or a read of
 *   another caller's write) before it is on disk, and a failed COMMIT rejects every statement of the
 *   turn. With synchronous=FULL one fsync then covers every request of the turn instead of one per
 *   statement. See docs/decisions/006-sqlite-group-commit.md.
 *
 * - FULL durability off the event loop (`syncWal`). With synchronous=FULL the COMMIT's fsync ran on the
 *   event loop and stalled every request for its duration (docs/decisions/033 has the measurements). With `syncWal` the connection runs with synchronous=NORMAL (a COMMIT
 *   only writes the WAL) and the driver itself fdatasyncs the WAL file on libuv's thread pool before it
 *   settles any statement of the commit: the same guarantee as FULL (the commit record is on disk before
 *   anyone hears of it), while the event loop keeps serving. One sync is in flight at a time; the writes
 *   of the turns that arrive meanwhile stay in one open transaction, committed at the end of the turn in which it
 *   returns (with the writes of that turn's other events), so the next sync covers all of them (decision 036). A read never answers with data whose commit is not yet synced.
 *   One exception: a write run by `executeVisible` (an idempotency claim) settles at its COMMIT; a commit that only
 *   such writes wait for starts no sync of its own and makes no read wait, and the next sync covers it (decision 078).
 *
 * - Checkpoints off the event loop (`checkpointInWorker`): the connection's automatic checkpoint (two
 *   fsyncs and a copy of the WAL, on the committing thread) is turned off, and a worker thread with its own
 *   connection checkpoints instead. See `WalCheckpointer`.
 *
 * Explicit transactions (`db.transaction()`) first commit the open group, then run alone: other
 * connections wait until they end, as with kysely's own single-connection mutex.
 */
export class GroupCommitSqliteDialect implements Dialect {
  private driver: GroupCommitSqliteDriver | undefined;

  constructor(
    private readonly database: BetterSqlite3.Database,
    private readonly options: GroupCommitOptions = {},
  ) {}

  createDriver(): Driver {
    this.driver = new GroupCommitSqliteDriver(this.database, this.options);
    return this.driver;
  }

  /**
   * Runs `first`, then, if it changed a row, `then`, as one unit inside this turn's group transaction (a savepoint:
   * all or none of them), settled after the group's COMMIT, like every other write; false when `first` changed no
   * row, `{ unapplied }` when a statement of `then` changed none: then nothing was written. Needs the Kysely instance
   * made over this dialect.
   */
  writeTogether(first: CompiledQuery, then: readonly CompiledQuery[]): Promise<WrittenTogether> {
    if (!this.driver) throw new Error('writeTogether needs a Kysely instance over this dialect');
    return this.driver.runTogether(first, then);
  }

  /**
   * Runs one compiled statement outside any explicit transaction, as `Kysely.executeQuery` does, without kysely's
   * executor (its connection provider, plugins pass and log event cost about as much as the statement itself).
   */
  execute<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (!this.driver) throw new Error('execute needs a Kysely instance over this dialect');
    return this.driver.direct.executeQuery<R>(query);
  }

  /**
   * A write as `execute` runs it, settled once its group has COMMITTED (every statement and connection sees it from
   * then on) without waiting for the WAL sync that makes it durable against power loss: the next sync that anyone
   * waits for covers it (the WAL is written in order). For a write whose loss to a power failure the caller can
   * bear: an idempotency key's claim (docs/decisions/078). Without `syncWal`, the same as `execute`.
   */
  executeVisible<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (!this.driver) throw new Error('executeVisible needs a Kysely instance over this dialect');
    return this.driver.direct.executeQuery<R>(query, true);
  }

  /**
   * A read as `execute` runs it, its rows as arrays of the column values in the order selected: better-sqlite3's
   * raw mode makes no object per row (a third less CPU for the 50 rows of a project tree).
   */
  readValues(query: CompiledQuery): Promise<unknown[][]> {
    if (!this.driver) throw new Error('readValues needs a Kysely instance over this dialect');
    return this.driver.direct.readValues(query);
  }

  createQueryCompiler() {
    return new SqliteQueryCompiler();
  }

  createAdapter() {
    return new SqliteAdapter();
  }

  createIntrospector(db: Kysely<any>) {
    return new SqliteIntrospector(db);
  }
}

/** Prepared statements kept per connection, by SQL text: at most this many, the least lately used dropped first. */
const STATEMENT_CACHE_SIZE = 256;

/**
 * Prepared statements kept by SQL text, at most `capacity` of them, the least lately used dropped first
 * (second chance: a hit marks its entry; the sweep for room moves a marked entry to the back, unmarked, and drops the
 * first unmarked one).
 *
 * A hit writes one flag and changes nothing else. A cache that deleted and re-inserted its key on every hit (to keep
 * the Map in recency order) made V8 rebuild the Map's table every few hundred hits: a new table for a Map that lives
 * in the old generation, promoted at the next scavenge, ~100 bytes of old generation per creation
 * (docs/decisions/123).
 */
export class StatementCache<T> {
  private readonly entries = new Map<string, { value: T; used: boolean }>();

  constructor(private readonly capacity: number) {}

  /** The value kept for `key` (marked as used), or undefined. */
  find(key: string): T | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    hit.used = true;
    return hit.value;
  }

  /** Keeps `value` for `key`, which `find` did not have, dropping the least lately used entry when full. */
  keep(key: string, value: T): void {
    if (this.entries.size >= this.capacity) this.dropOne();
    this.entries.set(key, { value, used: false });
  }

  get size(): number {
    return this.entries.size;
  }

  private dropOne(): void {
    // Every entry marked is moved back once and unmarked, so this ends within size + 1 steps.
    for (;;) {
      const [key, entry] = this.entries.entries().next().value!;
      this.entries.delete(key);
      if (!entry.used) return;
      entry.used = false;
      this.entries.set(key, entry);
    }
  }
}

export interface GroupCommitOptions {
  /**
   * FULL durability with the fsync off the event loop: the connection must run with synchronous=NORMAL in
   * WAL mode, and the driver fdatasyncs `${database.name}-wal` after each COMMIT before settling its statements.
   */
  syncWal?: boolean;
  /** Checkpoint from a worker thread (the connection's wal_autocheckpoint is set to 0). */
  checkpointInWorker?: boolean;
  /**
   * SQLITE_COMMIT_WINDOW_MS: a group opened while no sync is in flight, when in the last eight times this long a write
   * came while another's sync was in flight (or a request arrived while a group was open: `arrivals`), is committed
   * this long after its first write instead of at the end of its turn, so that the writes of a steady trickle from
   * several callers share one COMMIT and one fdatasync (docs/decisions/062, 113, 159). A lone caller's writes, and a
   * write after a quiet spell, commit at the end of their turn. 0: every group at the end of its turn.
   */
  commitWindowMs?: number;
  /**
   * How many requests the HTTP port has received so far (src/server/http.ts RequestArrivals): a request that arrives
   * while a group is open is another caller's too (a lone caller sends its next request only once its write is
   * answered), so a group during which one arrived counts as writes from more than one caller, as a write during
   * another's sync does, whatever the sync's speed.
   */
  arrivals?: { readonly count: number };
  /**
   * The least time between two checkpoints (SQLITE_CHECKPOINT_INTERVAL_MS, default 500 ms), from how many WAL frames
   * to restart the WAL (SQLITE_WAL_RESTART_FRAMES, default 65,536), whether the worker syncs the database file after a
   * checkpoint that copied pages (SQLITE_CHECKPOINT_SYNC, default true), how many nice steps below the event loop the
   * worker's thread runs (SQLITE_CHECKPOINT_NICE, default 10), how far ahead of the writer the worker reads the WAL's
   * idle parts (SQLITE_WAL_READ_AHEAD_MB, default 32 MiB), and `observe`: each checkpoint's answer, for tests.
   */
  checkpoint?: CheckpointOptions;
}

/** SQLITE_WAL_RESTART_FRAMES's default: 256 MiB of 4 KiB pages (docs/decisions/107). */
export const DEFAULT_RESTART_FRAMES = 65_536;

/** SQLITE_WAL_READ_AHEAD_MB's default, in bytes (docs/decisions/145). */
const DEFAULT_READ_AHEAD_BYTES = 32 * 1024 * 1024;

/** The checkpoint worker's settings (`GroupCommitOptions.checkpoint`). */
export interface CheckpointOptions {
  intervalMs?: number;
  restartFrames?: number;
  syncDatabase?: boolean;
  nice?: number;
  /** SQLITE_WAL_READ_AHEAD_MB in bytes (docs/decisions/145; default 32 MiB); 0: the WAL is not read ahead. */
  readAheadBytes?: number;
  /** How long a part of the WAL lies unused before it is read ahead (default 30 s): for tests. */
  readAheadIdleMs?: number;
  observe?: (reply: CheckpointReply) => void;
}

interface Waiter {
  /** Called with `value` once the statement is durable (once it is committed, when `visible`). */
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  /** What the statement's promise settles with (its result), kept here rather than in a closure per statement. */
  value?: unknown;
  /** Settled at its COMMIT, not after the WAL sync (`executeVisible`). */
  visible?: boolean;
}

/** Statements whose commit waits for the WAL sync that covers commit number `upTo`. */
interface Durable {
  upTo: number;
  waiters: Waiter[];
}

class GroupCommitSqliteDriver implements Driver {
  private readonly statements = new StatementCache<BetterSqlite3.Statement>(STATEMENT_CACHE_SIZE);
  /** Statements of the open group transaction waiting for its COMMIT; null when no group transaction is open. */
  private group: Waiter[] | null = null;
  /** The connection inside an explicit transaction, and what others wait on until it ends. */
  private owner: Connection | null = null;
  /** Settles when the current explicit transaction ends. */
  ownerDone: Promise<void> = Promise.resolve();
  private releaseOwner: () => void = () => undefined;
  /** A connection for single statements outside kysely (`GroupCommitSqliteDialect.execute`); never in a transaction. */
  readonly direct: Connection = new Connection(this);

  // syncWal: commits are numbered; `durable` is the last one a finished fdatasync covers.
  private readonly syncWal: boolean;
  private readonly commitWindowMs: number;
  /**
   * When a write last opened a group while a sync was in flight, or a group was committed during which a request
   * arrived (performance.now()): a sign that writes come from more than one caller at a time. A lone caller's next
   * write waits for its last one's sync, and its next request for the answer, so it never does either.
   */
  private lastConcurrent = -Infinity;
  /** `arrivals` when the open group opened. */
  private arrivalsAtOpen = 0;
  private readonly arrivals: { readonly count: number } | null;
  private walFd: number | null = null;
  private committed = 0;
  private durable = 0;
  /**
   * The last commit that anyone waits to be synced: a commit whose every statement was `visible` does not count, so
   * that no read waits, and no sync starts, for it alone; the next sync covers it all the same.
   */
  private awaited = 0;
  private syncing = false;
  private readonly pending: Durable[] = [];
  /** Set when an fdatasync failed: what was committed may not be on disk, and nothing is acknowledged any more. */
  private failure: Error | null = null;
  private readonly checkpointer: WalCheckpointer | null;
  /**
   * The savepoint of every unit (`runTogether`, one per mutation), prepared once: `exec` parses its text each time,
   * as much again as running it. BEGIN and COMMIT stay on `exec`: once per group, and the COMMIT's writing of the
   * WAL outweighs its parsing (decision 036: no difference).
   */
  private readonly unit: Record<'savepoint' | 'release', BetterSqlite3.Statement>;
  /** The other drivers of this process on the same file, whose write transactions this one waits for. */
  private readonly writers: FileWriters;

  constructor(
    readonly db: BetterSqlite3.Database,
    options: GroupCommitOptions,
  ) {
    this.unit = { savepoint: db.prepare('savepoint together'), release: db.prepare('release together') };
    this.syncWal = options.syncWal ?? false;
    this.commitWindowMs = options.commitWindowMs ?? 0;
    this.arrivals = options.arrivals ?? null;
    this.writers = FileWriters.join(db.name);
    this.checkpointer = options.checkpointInWorker
      ? new WalCheckpointer(db, () => this.group === null && this.owner === null, options.checkpoint)
      : null;
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    // Statements run synchronously, so connections need no lock of their own; only explicit
    // transactions are exclusive (see beginTransaction).
    return new Connection(this);
  }

  async releaseConnection(): Promise<void> {}

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    while (this.owner || this.writesHeld) await (this.owner ? this.ownerDone : this.writesReleased);
    this.commitGroup();
    try {
      this.db.exec('begin');
    } catch (error) {
      throw sqliteUnavailable(error);
    }
    this.writers.take(this);
    this.owner = connection as Connection;
    this.ownerDone = new Promise<void>((resolve) => (this.releaseOwner = resolve));
  }

  async commitTransaction(): Promise<void> {
    try {
      this.db.exec('commit');
    } catch (error) {
      // A COMMIT that fails may leave the transaction open; nothing else may run inside it.
      if (this.db.inTransaction) this.db.exec('rollback');
      throw sqliteUnavailable(error);
    } finally {
      this.endTransaction();
    }
    this.committed += 1;
    this.awaited = this.committed;
    await this.whenDurable(this.committed);
  }

  async rollbackTransaction(): Promise<void> {
    try {
      if (this.db.inTransaction) this.db.exec('rollback');
    } finally {
      this.endTransaction();
    }
  }

  async savepoint(_connection: DatabaseConnection, name: string): Promise<void> {
    this.db.exec(`savepoint ${quote(name)}`);
  }

  async rollbackToSavepoint(_connection: DatabaseConnection, name: string): Promise<void> {
    this.db.exec(`rollback to ${quote(name)}`);
  }

  async releaseSavepoint(_connection: DatabaseConnection, name: string): Promise<void> {
    this.db.exec(`release ${quote(name)}`);
  }

  async destroy(): Promise<void> {
    this.commitGroup();
    if (this.committed > this.durable && !this.failure) await this.whenDurable(this.committed).catch(() => undefined);
    await this.checkpointer?.close();
    this.writers.leave();
    if (this.walFd !== null) fs.closeSync(this.walFd);
    this.walFd = null;
    this.db.close();
  }

  private endTransaction(): void {
    this.writers.give(this);
    this.owner = null;
    this.releaseOwner();
    this.checkpointer?.tryRestart();
  }

  /** True while another connection is inside an explicit transaction. */
  blocked(connection: Connection): boolean {
    return this.owner !== null && this.owner !== connection;
  }

  get groupOpen(): boolean {
    return this.group !== null;
  }

  inExplicitTransaction(connection: Connection): boolean {
    return this.owner === connection;
  }

  prepare(sql: string): BetterSqlite3.Statement {
    let stmt = this.statements.find(sql);
    if (stmt === undefined) this.statements.keep(sql, (stmt = this.db.prepare(sql)));
    return stmt;
  }

  /**
   * True while new write transactions must wait: the checkpointer is restarting the WAL, or another driver of this
   * process holds a write transaction on the same file (FileWriters).
   */
  get writesHeld(): boolean {
    return (this.checkpointer?.holding ?? false) || this.writers.heldFrom(this);
  }

  get writesReleased(): Promise<void> {
    if (this.checkpointer?.holding) return this.checkpointer.released;
    return this.writers.heldFrom(this) ? this.writers.released() : Promise.resolve();
  }

  /**
   * Runs `work` inside the open group transaction; the promise settles after the group's COMMIT (and sync). It
   * rejects with what `sqliteUnavailable` makes of the error (every caller's answer to a failed statement or COMMIT).
   */
  inGroup<T>(work: () => T, visible = false): Promise<T> {
    if (this.failure) return Promise.reject(this.failure);
    if (!this.group) {
      if (this.arrivals) this.arrivalsAtOpen = this.arrivals.count;
      this.db.exec('begin immediate');
      this.writers.take(this);
      this.group = [];
      if (this.commitWindowMs > 0 && this.othersWriting()) setTimeout(this.endOfWindow, this.commitWindowMs);
      else setImmediate(() => this.endOfTurn());
    }
    const group = this.group;
    let result: T;
    try {
      result = work();
    } catch (error) {
      // Most errors (a constraint) undo only their statement; some (disk full, I/O) roll the whole
      // transaction back, and then every statement of the turn is lost with it.
      if (!this.db.inTransaction && this.group === group) this.fail(group, error);
      return Promise.reject(sqliteUnavailable(error));
    }
    return new Promise<T>((resolve, reject) =>
      group.push({ resolve: resolve as (value: unknown) => void, reject, value: result, visible }),
    );
  }

  /** The statements as one unit (a savepoint) in the open group; at once when nothing is to be waited for. */
  runTogether(first: CompiledQuery, then: readonly CompiledQuery[]): Promise<WrittenTogether> {
    if (this.owner || (this.group === null && this.writesHeld))
      return this.runTogetherWhenFree(first, then).catch(rejectUnavailable);
    return this.together(first, then);
  }

  private async runTogetherWhenFree(first: CompiledQuery, then: readonly CompiledQuery[]): Promise<WrittenTogether> {
    // Nothing awaits between this check and the statements (see Connection.executeQuery).
    while (this.owner || (this.group === null && this.writesHeld))
      await (this.owner ? this.ownerDone : this.writesReleased);
    return this.together(first, then);
  }

  private together(first: CompiledQuery, then: readonly CompiledQuery[]): Promise<WrittenTogether> {
    return this.inGroup((): WrittenTogether => {
      this.unit.savepoint.run();
      try {
        // Nothing of the unit was written yet: releasing the savepoint leaves nothing.
        if (this.prepare(first.sql).run(first.parameters as unknown[]).changes === 0) {
          this.unit.release.run();
          return false;
        }
        for (let i = 0; i < then.length; i++) {
          const q = then[i]!;
          if (this.prepare(q.sql).run(q.parameters as unknown[]).changes === 0) {
            // A statement of the unit that did not apply (a conflict it does not overwrite): none of the unit stays.
            this.db.exec('rollback to together; release together');
            return { unapplied: i };
          }
        }
      } catch (error) {
        // A constraint error leaves the transaction open: undo this unit's statements only.
        if (this.db.inTransaction) this.db.exec('rollback to together; release together');
        throw error;
      }
      this.unit.release.run();
      return true;
    });
  }

  /**
   * A read outside any transaction: it may see commits whose sync has not returned yet, so its answer
   * waits for that sync.
   */
  afterDurable<T>(result: T): T | Promise<T> {
    if (!this.syncWal || this.durable >= this.awaited) return result;
    if (this.failure) throw this.failure;
    return this.whenDurable(this.awaited).then(() => result);
  }

  /**
   * Whether a group opened now waits for its window: no sync is in flight (else the writes that arrive meanwhile share
   * the next commit anyway), and in the last eight windows a write came while another's sync was in flight or a request
   * arrived while a group was open, so that another write may well come within this one. A lone caller (one request at
   * a time) never waits.
   */
  private othersWriting(): boolean {
    const now = performance.now();
    if (this.syncing) {
      this.lastConcurrent = now;
      return false;
    }
    return now - this.lastConcurrent < 8 * this.commitWindowMs;
  }

  /** The end of a commit window: its group, if still open and no sync is in flight (else the sync's return commits it). */
  private readonly endOfWindow = (): void => {
    this.endOfTurn();
  };

  /** The end of a turn with an open group: commit it, unless a sync is in flight (it is committed when that returns). */
  private endOfTurn(): void {
    if (this.syncing) return;
    this.commitGroup();
  }

  /** Commits the open group, if any, and settles its statements once they are durable. */
  private commitGroup(): void {
    const group = this.group;
    if (!group) return;
    this.group = null;
    // A request that arrived while the group was open: another caller (see `arrivals`).
    if (this.arrivals && this.arrivals.count !== this.arrivalsAtOpen) this.lastConcurrent = performance.now();
    try {
      this.db.exec('commit');
    } catch (error) {
      try {
        if (this.db.inTransaction) this.db.exec('rollback');
      } catch {
        // the rollback error adds nothing to the commit error
      }
      this.writers.give(this);
      for (const w of group) w.reject(sqliteUnavailable(error));
      return;
    }
    this.writers.give(this);
    this.committed += 1;
    this.checkpointer?.committed();
    this.checkpointer?.tryRestart();
    if (!this.syncWal) {
      for (const w of group) w.resolve(w.value);
      return;
    }
    let waiters = group;
    if (group.some((w) => w.visible)) {
      waiters = [];
      for (const w of group) {
        if (w.visible) w.resolve(w.value);
        else waiters.push(w);
      }
      // Nobody waits for this commit's sync: it is left to the next sync someone waits for.
      if (waiters.length === 0) return;
    }
    this.awaited = this.committed;
    this.pending.push({ upTo: this.committed, waiters });
    this.sync();
  }

  private whenDurable(upTo: number): Promise<void> {
    if (!this.syncWal || this.durable >= upTo) return Promise.resolve();
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ upTo, waiters: [{ resolve: () => resolve(), reject }] });
      this.sync();
    });
  }

  /** Starts an fdatasync of the WAL covering every commit so far, unless one is in flight or nobody waits for one. */
  private sync(): void {
    if (this.syncing || this.durable >= this.committed || this.failure || this.pending.length === 0) return;
    let fd: number;
    try {
      fd = this.walFd ??= fs.openSync(`${this.db.name}-wal`, 'r');
    } catch (error) {
      this.syncFailed(error as Error);
      return;
    }
    this.syncing = true;
    const target = this.committed;
    fs.fdatasync(fd, (error) => {
      this.syncing = false;
      if (error) {
        this.syncFailed(error);
        return;
      }
      this.durable = target;
      while (this.pending.length && this.pending[0]!.upTo <= target) {
        for (const w of this.pending.shift()!.waiters) w.resolve(w.value);
      }
      // The writes that arrived during the sync are committed at the end of this turn, together with those of
      // the other events of the turn (answers that arrive in the same poll as this callback): one sync then
      // covers all of them, where committing here would leave the later ones for a sync of their own.
      if (this.group !== null || this.pending.length > 0) setImmediate(this.afterSync);
    });
  }

  /** After a sync returned: commits what arrived meanwhile (unless an explicit transaction runs) and syncs it. */
  private readonly afterSync = (): void => {
    if (this.syncing) return;
    if (!this.owner) this.commitGroup();
    this.sync();
  };

  private syncFailed(error: Error): void {
    // After a failed fsync the kernel may have dropped the pages it could not write: a later sync that
    // succeeds proves nothing about them. Nothing more is acknowledged; the process must restart.
    this.failure = new Error(`the database's WAL could not be synced to disk (${error.message}); restart the gateway`, {
      cause: error,
    });
    for (const d of this.pending.splice(0)) for (const w of d.waiters) w.reject(this.failure);
  }

  private fail(group: Waiter[], error: unknown): void {
    this.group = null;
    this.writers.give(this);
    for (const w of group) w.reject(sqliteUnavailable(error));
  }
}

/**
 * The write transactions of one database file among the drivers of this process. A gateway process runs one store per
 * DATA_DIR (holdDataDir), but a process may start several gateways on one (tests of a run taken over by another
 * replica), each with its own connection. SQLite makes a BEGIN that finds the file locked wait out busy_timeout on the
 * thread itself; in one process that is the thread on which the other connection would commit (its group stays open
 * across turns while its sync is in flight), so the wait could only end in SQLITE_BUSY. A driver therefore begins a
 * write transaction only while no other driver of the process holds one on the file, and otherwise waits off the
 * thread, as for the checkpointer's hold. A file with one driver (every gateway's) costs a comparison per transaction.
 */
class FileWriters {
  private static readonly byFile = new Map<string, FileWriters>();
  private holder: GroupCommitSqliteDriver | null = null;
  private drivers = 0;
  private waiting: Array<() => void> = [];

  private constructor(private readonly file: string | null) {}

  /** The writers of the connection's `file`, however its path is written (each in-memory database is its own). */
  static join(name: string): FileWriters {
    let file: string | null = null;
    try {
      if (name !== '' && name !== ':memory:') file = fs.realpathSync(name);
    } catch {
      // Not a file SQLite made: no other connection opens it by this name.
    }
    if (file === null) return new FileWriters(null);
    let writers = FileWriters.byFile.get(file);
    if (!writers) FileWriters.byFile.set(file, (writers = new FileWriters(file)));
    writers.drivers += 1;
    return writers;
  }

  /** The driver closed. */
  leave(): void {
    if (this.file !== null && --this.drivers === 0) FileWriters.byFile.delete(this.file);
  }

  /** True while a driver other than `driver` holds a write transaction on the file. */
  heldFrom(driver: GroupCommitSqliteDriver): boolean {
    return this.holder !== null && this.holder !== driver;
  }

  take(driver: GroupCommitSqliteDriver): void {
    this.holder = driver;
  }

  /** `driver`'s write transaction ended: the drivers waiting for it go on. */
  give(driver: GroupCommitSqliteDriver): void {
    if (this.holder !== driver) return;
    this.holder = null;
    if (this.waiting.length > 0) for (const go of this.waiting.splice(0)) go();
  }

  /** Settles when the write transaction held now ends. */
  released(): Promise<void> {
    return new Promise<void>((resolve) => this.waiting.push(resolve));
  }
}

/**
 * WAL checkpoints from a worker thread with its own connection (PASSIVE: it never blocks the writer), so
 * that the copy of the WAL into the database and its two fsyncs leave the event loop; the thread runs `nice` steps
 * below it, so that a copy does not share the core with the requests while it runs (decision 139). The writer's
 * automatic checkpoint is turned off. A checkpoint is asked for at most every `intervalMs` after commits, and after the
 * last commit of a burst once the interval ends.
 *
 * SQLite restarts the WAL from its beginning only when a write transaction begins while every frame has
 * been copied; under steady load the writer always has newer frames than the last checkpoint. So when the
 * WAL has grown past `restartFrames` (65,536 frames, 256 MiB), new write transactions wait (`holding`) while one more
 * checkpoint copies the few frames left; the next write then restarts the WAL. Only that short copy is waited for, and
 * never on the event loop. Its frames are few (those written during the checkpoint before it), and so is what SQLite's
 * sync of the database file then writes out: SQLite syncs that file only after a checkpoint that copied the whole WAL,
 * so the worker syncs it after every checkpoint that copied pages (`syncDatabase`; otherwise the hold's sync
 * writes out every page copied since the last restart: decisions 107, 136). So the WAL's size sets how often the hold
 * comes, not how long it lasts.
 */
class WalCheckpointer {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;
  private requested = false;
  /** A commit made since the last checkpoint was asked for: its frames wait for the next one. */
  private pending = false;
  /** The checkpoint asked for when the interval ends, for commits made within it (`schedule`). */
  private trailing: ReturnType<typeof setTimeout> | null = null;
  private last = 0;
  private closed = false;
  holding = false;
  released: Promise<void> = Promise.resolve();
  private release: () => void = () => undefined;
  private readonly intervalMs: number;
  private readonly restartFrames: number;
  private readonly observe: ((reply: CheckpointReply) => void) | undefined;

  /** `idle`: no write transaction is open on the writer's connection. */
  constructor(
    db: BetterSqlite3.Database,
    private readonly idle: () => boolean,
    options: CheckpointOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 500;
    this.restartFrames = options.restartFrames ?? DEFAULT_RESTART_FRAMES;
    this.observe = options.observe;
    db.pragma('wal_autocheckpoint = 0');
    const workerData: CheckpointWorkerData = {
      file: db.name,
      syncDatabase: options.syncDatabase ?? true,
      nice: options.nice ?? 10,
      readAheadBytes: options.readAheadBytes ?? DEFAULT_READ_AHEAD_BYTES,
      restartFrames: this.restartFrames,
      ...(options.readAheadIdleMs === undefined ? {} : { readAheadIdleMs: options.readAheadIdleMs }),
    };
    this.worker = new Worker(CHECKPOINT_WORKER, { workerData });
    this.worker.unref();
    this.exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.on('message', (m: CheckpointReply) => this.done(m));
    this.worker.on('error', () => {
      this.closed = true;
      this.done({ log: 0, checkpointed: 0, synced: false, readAhead: 0, error: 'the checkpoint worker failed' });
    });
  }

  /** After each commit: its frames are copied by the next checkpoint. */
  committed(): void {
    this.pending = true;
    this.schedule();
  }

  /**
   * Asks for a checkpoint when none is running and the last one is `intervalMs` old, or else when the interval ends,
   * whether or not another commit comes by then: the last frames of a burst are copied while the writer idles, not
   * left to the next burst's first checkpoint, which would copy and sync twice as much while requests wait.
   */
  private schedule(): void {
    if (this.requested || this.closed || this.holding || this.trailing) return;
    const wait = this.intervalMs - (performance.now() - this.last);
    if (wait <= 0) this.request();
    else this.trailing = setTimeout(this.due, wait).unref();
  }

  private readonly due = (): void => {
    this.trailing = null;
    if (this.pending) this.schedule();
  };

  /** While holding: the last checkpoint before the restart, once the writer has committed its open group. */
  tryRestart(): void {
    if (this.holding && !this.requested && !this.closed && this.idle()) this.request();
  }

  private request(): void {
    this.requested = true;
    this.pending = false;
    this.last = performance.now();
    this.worker.postMessage('checkpoint' satisfies CheckpointRequest);
  }

  private done(m: CheckpointReply): void {
    this.requested = false;
    this.observe?.(m);
    if (this.holding) {
      // Every frame is copied (or the attempt failed): the next write transaction restarts the WAL.
      this.holding = false;
      this.release();
      return;
    }
    if (!m.error && m.log >= this.restartFrames && !this.closed) {
      this.holding = true;
      this.released = new Promise<void>((resolve) => (this.release = resolve));
      this.tryRestart();
    } else if (this.pending) this.schedule();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.trailing) clearTimeout(this.trailing);
    if (this.holding) {
      this.holding = false;
      this.release();
    }
    this.worker.postMessage('close' satisfies CheckpointRequest);
    const timer = setTimeout(() => void this.worker.terminate(), 5_000);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * The checkpoint worker's module (checkpoint-worker.ts) as a Worker starts it: the compiled .js beside this file in
 * the build (`npm start` runs dist/src/main.js); from the sources (tsx, vitest), checkpoint-worker.sources.cjs, which
 * loads the .ts through tsx (a worker thread does not inherit the loader of the process that starts it).
 */
const CHECKPOINT_WORKER = new URL(
  import.meta.url.endsWith('.ts') ? './checkpoint-worker.sources.cjs' : './checkpoint-worker.js',
  import.meta.url,
);

class Connection implements DatabaseConnection {
  constructor(private readonly driver: GroupCommitSqliteDriver) {}

  /** `visible`: a write settles at its COMMIT, not after the WAL sync (`GroupCommitSqliteDialect.executeVisible`). */
  executeQuery<R>(compiled: CompiledQuery, visible = false): Promise<QueryResult<R>> {
    return this.runStatement(compiled, visible, runForResult) as Promise<QueryResult<R>>;
  }

  /** A read, its rows as arrays of values (raw mode, set for this call only: the cached statement is shared). */
  readValues(compiled: CompiledQuery): Promise<unknown[][]> {
    return this.runStatement(compiled, false, runForValues);
  }

  /**
   * Runs `run` on the cached statement when it may run: the waits and the group commit every statement goes through.
   * When there is nothing to wait for (the common case) the statement runs here, with no async function between it
   * and its caller; otherwise `runWhenFree` waits first. Either way a failure is what `sqliteUnavailable` makes of it.
   */
  private runStatement<T>(
    compiled: CompiledQuery,
    visible: boolean,
    run: (stmt: BetterSqlite3.Statement, parameters: unknown[]) => T,
  ): Promise<T> {
    const driver = this.driver;
    if (driver.blocked(this)) return this.runWhenFree(compiled, visible, run).catch(rejectUnavailable);
    let stmt: BetterSqlite3.Statement;
    try {
      stmt = driver.prepare(compiled.sql);
    } catch (error) {
      return Promise.reject(sqliteUnavailable(error));
    }
    if (!stmt.readonly && !driver.groupOpen && driver.writesHeld && !driver.inExplicitTransaction(this))
      return this.runWhenFree(compiled, visible, run).catch(rejectUnavailable);
    return this.runNow(stmt, compiled.parameters as unknown[], visible, run);
  }

  private async runWhenFree<T>(
    compiled: CompiledQuery,
    visible: boolean,
    run: (stmt: BetterSqlite3.Statement, parameters: unknown[]) => T,
  ): Promise<T> {
    // Checked again after every wait, and nothing awaits between this check and the statement: a
    // transaction that begins meanwhile is never entered by a statement outside it.
    while (this.driver.blocked(this)) await this.driver.ownerDone;
    const stmt = this.driver.prepare(compiled.sql);
    // While the checkpointer restarts the WAL, no new write transaction begins (reads go on).
    if (
      !stmt.readonly &&
      !this.driver.groupOpen &&
      this.driver.writesHeld &&
      !this.driver.inExplicitTransaction(this)
    ) {
      while (this.driver.writesHeld) await this.driver.writesReleased;
      return this.runWhenFree(compiled, visible, run);
    }
    return this.runNow(stmt, compiled.parameters as unknown[], visible, run);
  }

  /** Runs the statement now: inside this connection's transaction, as a read, or in the open group. */
  private runNow<T>(
    stmt: BetterSqlite3.Statement,
    parameters: unknown[],
    visible: boolean,
    run: (stmt: BetterSqlite3.Statement, parameters: unknown[]) => T,
  ): Promise<T> {
    const driver = this.driver;
    try {
      if (driver.inExplicitTransaction(this)) return Promise.resolve(run(stmt, parameters));
      // A read joins an open group too: what it sees may be another caller's uncommitted write, so its
      // answer waits for the same COMMIT.
      if (stmt.readonly && !driver.groupOpen) {
        const read = driver.afterDurable(run(stmt, parameters));
        return read instanceof Promise ? read.catch(rejectUnavailable) : Promise.resolve(read);
      }
    } catch (error) {
      return Promise.reject(sqliteUnavailable(error));
    }
    return driver.inGroup(() => run(stmt, parameters), visible);
  }

  async *streamQuery<R>(compiled: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    while (this.driver.blocked(this)) await this.driver.ownerDone;
    // Not from the cache: an iterating statement is busy until the stream ends.
    const stmt = this.driver.db.prepare(compiled.sql);
    if (!stmt.reader) throw new Error('the SQLite driver streams only queries that return rows');
    for (const row of stmt.iterate(compiled.parameters)) yield { rows: [row as R] };
  }
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** A statement's result as kysely reads it: its rows, or what it changed. */
function runForResult(stmt: BetterSqlite3.Statement, parameters: unknown[]): QueryResult<unknown> {
  if (stmt.reader) return { rows: stmt.all(parameters) };
  const { changes, lastInsertRowid } = stmt.run(parameters);
  return {
    numAffectedRows: changes !== undefined && changes !== null ? BigInt(changes) : undefined,
    insertId: lastInsertRowid !== undefined && lastInsertRowid !== null ? BigInt(lastInsertRowid) : undefined,
    rows: [],
  };
}

/** A read's rows as arrays of the column values (raw mode, set for this call only: the cached statement is shared). */
function runForValues(stmt: BetterSqlite3.Statement, parameters: unknown[]): unknown[][] {
  if (!stmt.reader) throw new Error('readValues runs only statements that return rows');
  stmt.raw(true);
  try {
    return stmt.all(parameters) as unknown[][];
  } finally {
    stmt.raw(false);
  }
}
