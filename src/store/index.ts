import fs from 'node:fs';
import path from 'node:path';
import { Kysely, Migrator, PostgresDialect, sql, type CompiledQuery, type LogEvent, type QueryResult } from 'kysely';
import type { PoolClient } from 'pg';

import { StoreUnavailableError } from '../errors.js';
import type { Logger } from '../logger.js';
import { holdDataDir, refuseNotSqlite, sqliteOpenFailure, StoreOpenError } from './data-dir.js';
import { migrationProvider, type Dialect } from './migrations.js';
import type { Database } from './schema.js';
import { DEFAULT_RESTART_FRAMES, GroupCommitSqliteDialect, type WrittenTogether } from './sqlite-dialect.js';
import { StatementNames } from './statement-names.js';
import { keepWal, keptWal, preallocateWal } from './wal-preallocate.js';

export type { Database } from './schema.js';
export type { Dialect } from './migrations.js';
export { StoreOpenError } from './data-dir.js';

export interface Store {
  readonly db: Kysely<Database>;
  readonly dialect: Dialect;
  /** Where the data lives, for the start-up line: a file path or the PostgreSQL host (never the password). */
  readonly location: string;
  /** Statements executed since start; lets tests and benchmarks count SQL per GraphQL operation. */
  readonly stats: { queries: number };
  /**
   * Runs `first`, then, if it changed a row, `then`, as one transaction with one commit: on SQLite inside the group
   * commit of the turn (no commit of its own), on PostgreSQL as a transaction. False when `first` changed no row:
   * nothing is written (a write that holds only under a condition, and what belongs to it). Each statement of `then`
   * must change a row too: when one changes none, nothing is written, and the answer names it (`unapplied`, its index).
   */
  writeTogether(first: CompiledQuery, then: readonly CompiledQuery[]): Promise<WrittenTogether>;
  /**
   * Runs one compiled statement outside any transaction, as `db.executeQuery` does; on SQLite straight to the
   * driver (kysely's executor cost about as much as a short statement), on PostgreSQL through kysely.
   */
  execute: Execute;
  /**
   * SQLite with FULL only: a write as `execute` runs it, settled once committed (visible to every statement) without
   * waiting for its WAL sync, which the next sync anyone waits for covers (docs/decisions/078). Unset elsewhere.
   */
  executeVisible?: Execute;
  /**
   * Runs one compiled read as `execute` does, each row an array of its column values in the order selected: on
   * SQLite without an object per row (better-sqlite3's raw mode), on PostgreSQL the values of kysely's rows.
   */
  readValues: ReadValues;
  /** Throws when the database does not answer. Used by /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Runs one compiled statement outside any transaction (Store.execute, or `db.executeQuery`). */
export type Execute = <R>(query: CompiledQuery<R>) => Promise<QueryResult<R>>;

/** Runs one compiled read; each row is the array of its column values in select order (Store.readValues). */
export type ReadValues = (query: CompiledQuery) => Promise<unknown[][]>;

/** `readValues` over any `execute`: the values of each row object, which holds its columns in select order. */
function valuesOf(execute: Execute): ReadValues {
  return async (query) =>
    (await execute<Record<string, unknown>>(query as CompiledQuery<Record<string, unknown>>)).rows.map((row) =>
      Object.values(row),
    );
}

/** What the ledger and the idempotency records run their statements through: a Store, or `throughKysely(db)`. */
export type Statements = Pick<Store, 'db' | 'writeTogether' | 'execute' | 'readValues'>;

/**
 * The statements of a Store through kysely alone: PostgreSQL's, and those of any Kysely a test builds. A transaction
 * per `writeTogether`, `executeQuery` per statement, the values of kysely's row objects for `readValues`.
 */
export function throughKysely(db: Kysely<Database>): Statements {
  const execute: Execute = (query) => db.executeQuery(query);
  return {
    db,
    execute,
    readValues: valuesOf(execute),
    writeTogether: (first, then) =>
      db
        .transaction()
        .execute(async (trx): Promise<WrittenTogether> => {
          if (Number((await trx.executeQuery(first)).numAffectedRows ?? 0n) === 0) return false;
          for (let i = 0; i < then.length; i++)
            if (Number((await trx.executeQuery(then[i]!)).numAffectedRows ?? 0n) === 0) throw new Unapplied(i);
          return true;
        })
        .catch((error: unknown) => {
          // Thrown to roll the transaction back.
          if (error instanceof Unapplied) return { unapplied: error.index };
          throw error;
        }),
  };
}

/** A statement of `writeTogether` that changed no row, thrown to roll its transaction back (`throughKysely`). */
class Unapplied extends Error {
  constructor(readonly index: number) {
    super(`statement ${index} of the unit changed no row`);
  }
}

export interface StoreOptions {
  dataDir: string;
  databaseUrl?: string | undefined;
  logger: Logger;
  /**
   * SQLite `synchronous`: FULL (the default) makes a commit durable against power loss before the
   * webhook is acknowledged; NORMAL is durable against a process crash only. See docs/decisions/002.
   */
  sqliteSynchronous?: 'FULL' | 'NORMAL';
  /** SQLITE_COMMIT_WINDOW_MS (default 1; docs/decisions/062, 113, 159); ignored with DATABASE_URL. */
  sqliteCommitWindowMs?: number;
  /** The HTTP port's count of requests received, which the commit window reads (src/server/http.ts RequestArrivals). */
  requestArrivals?: { readonly count: number };
  /** SQLITE_CHECKPOINT_INTERVAL_MS (docs/decisions/033); ignored with DATABASE_URL. */
  sqliteCheckpointIntervalMs?: number;
  /** SQLITE_WAL_RESTART_FRAMES (docs/decisions/107); ignored with DATABASE_URL. */
  sqliteWalRestartFrames?: number;
  /**
   * SQLITE_WAL_PREALLOCATE (docs/decisions/141): the gateway's start passes the configuration's (true unless set);
   * absent, false, and a WAL kept by the gateway's last stop is left alone (`migrate`). Ignored with DATABASE_URL.
   */
  sqliteWalPreallocate?: boolean;
  /** SQLITE_CHECKPOINT_SYNC (docs/decisions/136; default true); ignored with DATABASE_URL. */
  sqliteCheckpointSync?: boolean;
  /** SQLITE_CHECKPOINT_NICE (docs/decisions/139; default 10); ignored with DATABASE_URL. */
  sqliteCheckpointNice?: number;
  /** SQLITE_WAL_READ_AHEAD_MB (docs/decisions/145; default 32); ignored with DATABASE_URL. */
  sqliteWalReadAheadMb?: number;
  /** SQLITE_CACHE_KIB (default 4,096; docs/decisions/118); ignored with DATABASE_URL. */
  sqliteCacheKib?: number;
  /** STORE_PG_NAMED_STATEMENTS (default true; docs/decisions/104); ignored without DATABASE_URL. */
  pgNamedStatements?: boolean;
  /**
   * PostgreSQL only: called with why while the server cannot be reached at start-up (the store waits for it,
   * retrying with backoff), and with null once it answers.
   */
  onUnreachable?: (why: string | null) => void;
  /**
   * apply (the default): the migrations the database lacks are applied now. wait: none is applied; the store waits,
   * telling `onUnreachable` why, until another process (`main.js migrate`) has applied every one this release knows.
   */
  migrations?: 'apply' | 'wait';
  /** Tests only: the pause between two looks at the applied migrations in `wait` mode (default 2 s). */
  migrationPollMs?: number;
  /**
   * Aborted by a shutdown that comes while the store opens: the waits for PostgreSQL and for the migrations stop (at
   * once in a pause, after the attempt under way otherwise), what was opened is closed, and openStore rejects with the
   * signal's reason. Migrations being applied are not interrupted: the store opens once they are done.
   */
  signal?: AbortSignal;
}

/**
 * Failures worth waiting out (at start-up, and as SERVICE_UNAVAILABLE to a caller): the server is not up (yet),
 * restarting, not routable, or refusing what only its cure lets through.
 */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  // The server answers but refuses, until its operator or a failover cures it: no connection slot left (53300, too
  // many connections for the server, the database or the role), out of disk or memory (the rest of class 53), and
  // writes refused because it is read-only (25006: a standby reached after a failover, or a primary made read-only).
  '25006',
]);
/** SQLSTATE classes whose every code is such a failure (53: insufficient resources), besides 08 (connection). */
const UNREACHABLE_CLASSES = ['08', '53'];
const RETRY_MAX_MS = 5_000;

/**
 * PostgreSQL that stops answering without closing its connections (a partition, a host gone) would leave every
 * statement waiting for good. A new connection gets CONNECT_TIMEOUT_MS to answer its start-up, and a request waits
 * as long for a free one. A statement still unanswered after SILENCE_CHECK_MS is told from a slow one (a migration, a
 * purge of a long backlog) by asking the database, on another connection, for a `select 1` within CONNECT_TIMEOUT_MS:
 * answered, the statement waits on (and is asked about again); unanswered, its connection is cut, never used again (a
 * late answer cannot be read as the next statement's), and the caller gets SERVICE_UNAVAILABLE. LISTEN has its own
 * connection (src/events/postgres-bus.ts).
 */
const CONNECT_TIMEOUT_MS = 5_000;
const SILENCE_CHECK_MS = 10_000;
const KEEPALIVE_DELAY_MS = 10_000;

/** Cuts `client`'s connection: its statement (and any queued behind it) fails, and the pool drops it. */
function cut(client: unknown, why: string): void {
  (client as { connection: { stream: { destroy(err?: Error): void } } }).connection.stream.destroy(
    new Error(`Connection terminated: ${why}`),
  );
}

/** What opens and ends a transaction: a COMMIT that goes unanswered may have committed, any statement before it not. */
const BEGIN = /^\s*(begin|start\s+transaction)\b/i;
const ENDS = /^\s*(commit|rollback|end|abort)\b/i;
const COMMIT = /^\s*(commit|end)\b/i;
const READ = /^\s*(select|show|begin|start|rollback|abort|savepoint|release)\b/i;

/** The error a caller sees for `err`: SERVICE_UNAVAILABLE when the database is away, else `err` itself. */
function unavailable(err: unknown): unknown {
  return databaseUnreachable(err) ? new StoreUnavailableError(err) : err;
}

/** A failure of the connection to PostgreSQL (waiting may cure it), not of the statement (an SQL error never is). */
export function databaseUnreachable(err: unknown): boolean {
  if (err instanceof StoreUnavailableError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string')
    return UNREACHABLE_CODES.has(code) || UNREACHABLE_CLASSES.some((c) => code.length === 5 && code.startsWith(c));
  return (
    err instanceof Error &&
    /Connection terminated|timeout expired|timeout exceeded when trying to connect|not queryable/i.test(err.message)
  );
}

/** A pause of `ms` between two attempts, which an abort of `signal` ends at once, rejecting with its reason. */
function pauseUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Waits until PostgreSQL answers, retrying with backoff: a gateway started before its database (a pod scheduled
 * first, a database restarting) waits instead of exiting into a crash loop. A refusal that waiting does not cure
 * (wrong password, no such database) is thrown at once.
 */
async function waitForPostgres(ping: () => Promise<unknown>, location: string, options: StoreOptions): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    options.signal?.throwIfAborted();
    try {
      await ping();
      if (attempt > 1) {
        options.logger.info({ store: location, attempts: attempt }, 'PostgreSQL answers: starting');
        options.onUnreachable?.(null);
      }
      return;
    } catch (err) {
      if (!databaseUnreachable(err)) throw err;
      const retryInMs = Math.min(RETRY_MAX_MS, 250 * 2 ** (attempt - 1));
      const why = `waiting for PostgreSQL at ${location}: ${(err as Error).message}`;
      options.onUnreachable?.(why);
      options.logger.warn(
        {
          store: location,
          attempt,
          retryInMs,
          err: { message: (err as Error).message, code: (err as { code?: string }).code },
        },
        'PostgreSQL is not reachable: waiting for it, retrying with backoff',
      );
      await pauseUnlessAborted(retryInMs, options.signal);
    }
  }
}

/**
 * DATABASE_MIGRATIONS=wait: looks at the applied migrations until none this release knows is missing, saying which
 * are (the pods of a rolling update wait for the migration Job instead of applying them themselves).
 */
async function waitForMigrations(migrator: Migrator, location: string, options: StoreOptions): Promise<void> {
  for (let looks = 1; ; looks++) {
    options.signal?.throwIfAborted();
    const missing = (await migrator.getMigrations()).filter((m) => m.executedAt === undefined).map((m) => m.name);
    if (missing.length === 0) {
      if (looks > 1) {
        options.logger.info({ store: location }, 'the database has every migration: starting');
        options.onUnreachable?.(null);
      }
      return;
    }
    const why = `waiting for migrations ${missing.join(', ')} (DATABASE_MIGRATIONS=wait: run \`node dist/src/main.js migrate\`)`;
    options.onUnreachable?.(why);
    if (looks === 1)
      options.logger.warn(
        { store: location, missing },
        'the database lacks migrations: waiting for `main.js migrate` to apply them',
      );
    await pauseUnlessAborted(options.migrationPollMs ?? 2_000, options.signal);
  }
}

/**
 * Why the migrations failed, naming the variable that points at the database. A database that holds a migration this
 * release does not know was migrated by a newer release: kysely then applies nothing and calls it corrupted, and
 * this release must not use a schema it does not know.
 */
async function migrationFailure(
  db: Kysely<Database>,
  dialect: Dialect,
  location: string,
  error: unknown,
): Promise<StoreOpenError> {
  const variable = dialect === 'postgres' ? 'DATABASE_URL' : 'DATA_DIR';
  const known = new Set(Object.keys(await migrationProvider(dialect).getMigrations()));
  const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db).then(
    ({ rows }) => rows.map((row) => row.name),
    () => [],
  );
  const unknown = applied.filter((name) => !known.has(name));
  if (unknown.length > 0)
    return new StoreOpenError(
      variable,
      location,
      `the database has migrations this release does not know (${unknown.join(', ')}): a newer release of the ` +
        'gateway migrated it. Start that release or a later one; this one has changed nothing in the database',
      { cause: error },
    );
  const message = error instanceof Error ? error.message : String(error);
  return new StoreOpenError(variable, location, `database migration failed: ${message}`, { cause: error });
}

/**
 * Opens the store (SQLite in DATA_DIR, or PostgreSQL at DATABASE_URL) and runs the migrations (or, with `migrations:
 * 'wait'`, waits until they have been run).
 */
export async function openStore(options: StoreOptions): Promise<Store> {
  const stats = { queries: 0 };
  const log = (event: LogEvent) => {
    stats.queries += 1;
    if (event.level === 'error') options.logger.error({ err: event.error, sql: event.query.sql }, 'sql error');
  };
  let db: Kysely<Database>;
  let writeTogether: Store['writeTogether'];
  let execute: Execute;
  let executeVisible: Execute | undefined;
  let readValues: ReadValues;
  const openConnections = new Set<Promise<void>>();
  let dialect: Dialect;
  let location: string;
  /** Around the store's close: what keeps SQLite's WAL for the next start (SQLITE_WAL_PREALLOCATE), or nothing. */
  let closing: { before(): void; after(): Promise<void> } = { before: () => undefined, after: async () => undefined };
  /** SQLite: ends this store's hold on DATA_DIR (one gateway process per DATA_DIR), once its database is closed. */
  let releaseDataDir = () => undefined as void;
  if (options.databaseUrl) {
    const { default: pg } = await import('pg');
    // bigint columns hold epoch milliseconds, well inside 2^53: read them as numbers, not strings.
    pg.types.setTypeParser(20, (v: string) => Number(v));
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: 10,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
    });
    const names = options.pgNamedStatements === false ? null : new StatementNames();
    // An idle client whose server went away (restart, failover) emits 'error' on the pool; without a
    // listener that would crash the process. The pool replaces the client on the next query.
    const onConnectionError = (err: Error) =>
      options.logger.warn(
        { err: { message: err.message, code: (err as { code?: string }).code } },
        'a PostgreSQL connection failed',
      );
    pool.on('error', onConnectionError);
    /** The connections a probe of `answers` holds: their statement is bounded by the probe, not checked. */
    const probing = new WeakSet<object>();
    /** Whether PostgreSQL answers a `select 1` on a connection of the pool (another one) within CONNECT_TIMEOUT_MS. */
    const answers = (): Promise<boolean> =>
      new Promise<boolean>((resolve) => {
        let done = false;
        let held: PoolClient | undefined;
        const settle = (alive: boolean) => {
          if (done) return;
          done = true;
          clearTimeout(bound);
          resolve(alive);
        };
        const bound = setTimeout(() => {
          settle(false);
          if (held) cut(held, `a probe was not answered within ${CONNECT_TIMEOUT_MS} ms`);
        }, CONNECT_TIMEOUT_MS);
        pool.connect().then(
          (client) => {
            if (done) return client.release();
            held = client;
            probing.add(client);
            client.query('select 1').then(
              () => {
                probing.delete(client);
                client.release();
                settle(true);
              },
              (err: unknown) => {
                probing.delete(client);
                client.release(err as Error);
                settle(false);
              },
            );
          },
          () => settle(false),
        );
      });
    // pool.end() resolves before the sockets are closed; close() waits for them, and a late error from a
    // closing connection (the server shutting down at the same moment) is logged, not thrown.
    pool.on('connect', (client) => {
      client.on('error', onConnectionError);
      // A statement whose connection dies under it (a restart, a failover) is SERVICE_UNAVAILABLE, like a refused
      // connection: retryable, nothing stored (the transaction did not commit).
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      /** Whether a transaction is open on this connection (its statements commit only with its COMMIT). */
      let inTransaction = false;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        // A statement sent again and again goes named (STORE_PG_NAMED_STATEMENTS): kysely passes its text and values.
        const [text, values] = args;
        const name =
          names && typeof text === 'string' && Array.isArray(values) && args.length === 2
            ? names.nameOf(text, values.length)
            : undefined;
        const statement = typeof text === 'string' ? text : ((text as { text?: unknown } | null)?.text ?? '');
        const sqlText = typeof statement === 'string' ? statement : '';
        // Unanswered, a COMMIT or a write outside a transaction may have been applied; anything else was not.
        const mayCommit = COMMIT.test(sqlText) || (!inTransaction && !READ.test(sqlText));
        if (BEGIN.test(sqlText)) inTransaction = true;
        else if (ENDS.test(sqlText)) inTransaction = false;
        const result = name === undefined ? query(...args) : query({ name, text, values });
        if (!(result instanceof Promise)) return result;
        let timer: NodeJS.Timeout | undefined;
        let timedOut = false;
        let settled = false;
        // A probe's own `select 1` is bounded by the probe.
        if (!probing.has(client)) {
          const check = () => {
            timer = undefined;
            void answers().then((alive) => {
              if (settled) return;
              if (alive) timer = setTimeout(check, SILENCE_CHECK_MS);
              else {
                timedOut = true;
                cut(client, `PostgreSQL did not answer within ${SILENCE_CHECK_MS} ms, nor a probe`);
              }
            });
          };
          timer = setTimeout(check, SILENCE_CHECK_MS);
        }
        return result.then(
          (value) => {
            settled = true;
            clearTimeout(timer);
            return value;
          },
          (err: unknown) => {
            settled = true;
            clearTimeout(timer);
            if (name !== undefined && names?.refused(err))
              options.logger.warn(
                { err: { message: (err as Error).message } },
                'a named statement no longer fits its table (a migration ran meanwhile): statements go unnamed from now on',
              );
            if (timedOut) {
              options.logger.warn(
                {
                  err: { message: (err as Error).message },
                  afterMs: SILENCE_CHECK_MS,
                  mayHaveCommitted: mayCommit,
                },
                'PostgreSQL answered neither a statement nor a probe: its connection is cut',
              );
              return Promise.reject(new StoreUnavailableError(err, mayCommit));
            }
            return Promise.reject(unavailable(err));
          },
        );
      };
      const ended = new Promise<void>((resolve) => client.once('end', resolve));
      openConnections.add(ended);
      void ended.then(() => openConnections.delete(ended));
    });
    // Acquiring a connection while PostgreSQL is away: SERVICE_UNAVAILABLE, the cause kept for the log.
    db = new Kysely<Database>({
      dialect: new PostgresDialect({
        pool: {
          connect: () => pool.connect().catch((err: unknown) => Promise.reject(unavailable(err))),
          end: () => pool.end(),
        },
      }),
      log,
    });
    ({ writeTogether, execute, readValues } = throughKysely(db));
    dialect = 'postgres';
    const url = new URL(options.databaseUrl);
    location = `postgresql://${url.host}${url.pathname}`;
    try {
      // On the pool, not through kysely: its log would report every attempt as an sql error.
      // Through a client of the pool, whose statements have the statement timeout (pool.query's callback has none).
      const ping = async () => {
        const client = await pool.connect();
        try {
          await client.query('select 1');
          client.release();
        } catch (err) {
          client.release(err as Error);
          throw err;
        }
      };
      await waitForPostgres(ping, location, options);
    } catch (err) {
      await db.destroy();
      // A shutdown stopped the wait: not a refusal of PostgreSQL, and the caller tells it by the reason itself.
      if (options.signal?.aborted) throw options.signal.reason;
      throw new StoreOpenError('DATABASE_URL', location, `PostgreSQL refused: ${(err as Error).message}`, {
        cause: err,
      });
    }
  } else {
    const cacheKib = options.sqliteCacheKib ?? 4_096;
    if (!Number.isSafeInteger(cacheKib) || cacheKib < 1) throw new RangeError(`a page cache of ${cacheKib} KiB`);
    const { default: SQLite } = await import('better-sqlite3');
    const file = path.join(options.dataDir, 'gateway.sqlite');
    try {
      fs.mkdirSync(options.dataDir, { recursive: true });
      // Before the lock and the WAL written ahead: nothing is written beside a file the gateway will not use.
      refuseNotSqlite(options.dataDir, file);
      releaseDataDir = holdDataDir(SQLite, options.dataDir);
    } catch (err) {
      throw sqliteOpenFailure(options.dataDir, file, err);
    }
    const restartFrames = options.sqliteWalRestartFrames ?? DEFAULT_RESTART_FRAMES;
    if (options.sqliteWalPreallocate === true) {
      // The WAL's blocks outlive a clean stop, to be linked in again at the next start (docs/decisions/141).
      closing = { before: () => keepWal(file), after: () => keptWal(file) };
      // Past its restart size by the frames written during the last checkpoint before the restart. A shortcut: where
      // it cannot be taken (a full disk), the WAL grows as SQLite writes it.
      await preallocateWal(SQLite, file, restartFrames + Math.ceil(restartFrames / 8)).catch((err: unknown) =>
        options.logger.warn(
          { err },
          'the WAL was not written ahead at its full size (SQLITE_WAL_PREALLOCATE): it grows as SQLite writes it',
        ),
      );
    } else if (options.sqliteWalPreallocate === false) {
      // Set off: a WAL kept by an earlier stop is only disk space (a second name, if a crash left the WAL itself).
      // Absent (`migrate`), it stays for the gateway that starts next.
      fs.rmSync(`${file}-wal.kept`, { force: true });
    }
    let database: InstanceType<typeof SQLite> | undefined;
    try {
      database = new SQLite(file);
      database.pragma('journal_mode = WAL');
    } catch (err) {
      database?.close();
      releaseDataDir();
      throw sqliteOpenFailure(options.dataDir, file, err);
    }
    // FULL: the COMMIT itself does not fsync (NORMAL); the dialect fdatasyncs the WAL off the event loop
    // before any statement of the commit settles, which is the guarantee of FULL (docs/decisions/033).
    database.pragma('synchronous = NORMAL');
    database.pragma('busy_timeout = 5000');
    database.pragma('foreign_keys = ON');
    // Not better-sqlite3's 16,000 KiB: a COMMIT after a page split visits every cached page (docs/decisions/118).
    database.pragma(`cache_size = -${cacheKib}`);
    const full = (options.sqliteSynchronous ?? 'FULL') === 'FULL';
    const sqliteDialect = new GroupCommitSqliteDialect(database, {
      syncWal: full,
      checkpointInWorker: true,
      commitWindowMs: options.sqliteCommitWindowMs ?? 1,
      ...(options.requestArrivals ? { arrivals: options.requestArrivals } : {}),
      checkpoint: {
        ...(options.sqliteCheckpointIntervalMs === undefined ? {} : { intervalMs: options.sqliteCheckpointIntervalMs }),
        restartFrames,
        ...(options.sqliteCheckpointSync === undefined ? {} : { syncDatabase: options.sqliteCheckpointSync }),
        ...(options.sqliteCheckpointNice === undefined ? {} : { nice: options.sqliteCheckpointNice }),
        ...(options.sqliteWalReadAheadMb === undefined
          ? {}
          : { readAheadBytes: options.sqliteWalReadAheadMb * 1024 * 1024 }),
      },
    });
    db = new Kysely<Database>({ dialect: sqliteDialect, log });
    writeTogether = (first, then) => {
      // Past kysely's executor, so counted here.
      stats.queries += 1 + then.length;
      return sqliteDialect.writeTogether(first, then);
    };
    // Past kysely's executor: counted and their failures logged here, as kysely's log does.
    const direct = <T>(query: CompiledQuery, run: Promise<T>): Promise<T> => {
      stats.queries += 1;
      return run.catch((error: unknown) => {
        options.logger.error({ err: error, sql: query.sql }, 'sql error');
        throw error;
      });
    };
    execute = <R>(query: CompiledQuery<R>) => direct(query, sqliteDialect.execute<R>(query));
    if (full) executeVisible = <R>(query: CompiledQuery<R>) => direct(query, sqliteDialect.executeVisible<R>(query));
    readValues = (query) => direct(query, sqliteDialect.readValues(query));
    dialect = 'sqlite';
    location = file;
  }

  const migrator = new Migrator({ db, provider: migrationProvider(dialect) });
  if (options.migrations === 'wait') {
    try {
      await waitForMigrations(migrator, location, options);
    } catch (err) {
      await db.destroy();
      throw err;
    }
  } else {
    const { error, results } = await migrator.migrateToLatest();
    if (error) {
      const failure = await migrationFailure(db, dialect, location, error);
      await db.destroy();
      releaseDataDir();
      throw failure;
    }
    for (const r of results ?? []) {
      if (r.status === 'Success') options.logger.info({ migration: r.migrationName }, 'migration applied');
    }
  }

  return {
    db,
    dialect,
    location,
    stats,
    writeTogether,
    execute,
    ...(executeVisible ? { executeVisible } : {}),
    readValues,
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      const notKept = (err: unknown) =>
        options.logger.warn({ err }, 'the WAL was not kept for the next start (SQLITE_WAL_PREALLOCATE)');
      try {
        closing.before();
      } catch (err) {
        notKept(err);
      }
      await db.destroy();
      await Promise.all(openConnections);
      await closing.after().catch(notKept);
      releaseDataDir();
    },
  };
}
