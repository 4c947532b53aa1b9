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

/**
 * kysely's SQLite dialect over one better-sqlite3 connection, with two changes that matter under load
 * (measured in bench/README.md):
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
 * Explicit transactions (`db.transaction()`) first commit the open group, then run alone: other
 * connections wait until they end, as with kysely's own single-connection mutex.
 */
export class GroupCommitSqliteDialect implements Dialect {
  private driver: GroupCommitSqliteDriver | undefined;

  constructor(
    private readonly database: BetterSqlite3.Database,
    private readonly options: { statementCacheSize?: number } = {},
  ) {}

  createDriver(): Driver {
    this.driver = new GroupCommitSqliteDriver(this.database, this.options.statementCacheSize ?? 256);
    return this.driver;
  }

  /**
   * Runs the statements as one unit inside this turn's group transaction (a savepoint: all or none of them),
   * settled after the group's COMMIT, like every other write. Needs the Kysely instance made over this dialect.
   */
  writeTogether(queries: readonly CompiledQuery[]): Promise<void> {
    if (!this.driver) throw new Error('writeTogether needs a Kysely instance over this dialect');
    return this.driver.runTogether(queries);
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

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

class GroupCommitSqliteDriver implements Driver {
  private readonly statements = new Map<string, BetterSqlite3.Statement>();
  /** Statements of this turn waiting for the group's COMMIT; null when no group transaction is open. */
  private group: Waiter[] | null = null;
  /** The connection inside an explicit transaction, and what others wait on until it ends. */
  private owner: Connection | null = null;
  /** Settles when the current explicit transaction ends. */
  ownerDone: Promise<void> = Promise.resolve();
  private releaseOwner: () => void = () => undefined;

  constructor(
    readonly db: BetterSqlite3.Database,
    private readonly cacheSize: number,
  ) {}

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    // Statements run synchronously, so connections need no lock of their own; only explicit
    // transactions are exclusive (see beginTransaction).
    return new Connection(this);
  }

  async releaseConnection(): Promise<void> {}

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    while (this.owner) await this.ownerDone;
    this.flush();
    this.db.exec('begin');
    this.owner = connection as Connection;
    this.ownerDone = new Promise<void>((resolve) => (this.releaseOwner = resolve));
  }

  async commitTransaction(): Promise<void> {
    try {
      this.db.exec('commit');
    } catch (error) {
      // A COMMIT that fails may leave the transaction open; nothing else may run inside it.
      if (this.db.inTransaction) this.db.exec('rollback');
      throw error;
    } finally {
      this.endTransaction();
    }
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
    this.flush();
    this.db.close();
  }

  private endTransaction(): void {
    this.owner = null;
    this.releaseOwner();
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
    let stmt = this.statements.get(sql);
    if (stmt) {
      // Map order is insertion order: re-insert to mark it recently used.
      this.statements.delete(sql);
    } else {
      stmt = this.db.prepare(sql);
      if (this.statements.size >= this.cacheSize) this.statements.delete(this.statements.keys().next().value!);
    }
    this.statements.set(sql, stmt);
    return stmt;
  }

  /** Runs `work` inside this turn's group transaction; the promise settles after the group's COMMIT. */
  inGroup<T>(work: () => T): Promise<T> {
    if (!this.group) {
      this.db.exec('begin immediate');
      this.group = [];
      setImmediate(() => this.flush());
    }
    const group = this.group;
    let result: T;
    try {
      result = work();
    } catch (error) {
      // Most errors (a constraint) undo only their statement; some (disk full, I/O) roll the whole
      // transaction back, and then every statement of the turn is lost with it.
      if (!this.db.inTransaction && this.group === group) this.fail(group, error);
      return Promise.reject(error);
    }
    return new Promise<T>((resolve, reject) => group.push({ resolve: () => resolve(result), reject }));
  }

  async runTogether(queries: readonly CompiledQuery[]): Promise<void> {
    // Nothing awaits between this check and the statements (see Connection.executeQuery).
    while (this.owner) await this.ownerDone;
    return this.inGroup(() => {
      this.db.exec('savepoint together');
      try {
        for (const q of queries) this.prepare(q.sql).run(q.parameters as unknown[]);
      } catch (error) {
        // A constraint error leaves the transaction open: undo this unit's statements only.
        if (this.db.inTransaction) this.db.exec('rollback to together; release together');
        throw error;
      }
      this.db.exec('release together');
    });
  }

  /** Commits the open group, if any, and settles its statements. */
  flush(): void {
    const group = this.group;
    if (!group) return;
    this.group = null;
    try {
      this.db.exec('commit');
    } catch (error) {
      try {
        if (this.db.inTransaction) this.db.exec('rollback');
      } catch {
        // the rollback error adds nothing to the commit error
      }
      for (const w of group) w.reject(error);
      return;
    }
    for (const w of group) w.resolve();
  }

  private fail(group: Waiter[], error: unknown): void {
    this.group = null;
    for (const w of group) w.reject(error);
  }
}

class Connection implements DatabaseConnection {
  constructor(private readonly driver: GroupCommitSqliteDriver) {}

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    // Checked again after every wait, and nothing awaits between this check and the statement: a
    // transaction that begins meanwhile is never entered by a statement outside it.
    while (this.driver.blocked(this)) await this.driver.ownerDone;
    const { sql, parameters } = compiled;
    const stmt = this.driver.prepare(sql);
    const run = (): QueryResult<R> => {
      if (stmt.reader) return { rows: stmt.all(parameters) as R[] };
      const { changes, lastInsertRowid } = stmt.run(parameters);
      return {
        numAffectedRows: changes !== undefined && changes !== null ? BigInt(changes) : undefined,
        insertId: lastInsertRowid !== undefined && lastInsertRowid !== null ? BigInt(lastInsertRowid) : undefined,
        rows: [],
      };
    };
    if (this.driver.inExplicitTransaction(this)) return run();
    // A read joins an open group too: what it sees may be another caller's uncommitted write, so its
    // answer waits for the same COMMIT.
    if (stmt.readonly && !this.driver.groupOpen) return run();
    return this.driver.inGroup(run);
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
