import fs from 'node:fs';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';

/**
 * A store the gateway cannot open or use at start-up: the message names the variable to fix, where it points (a
 * folder, or a PostgreSQL host and database: never a password) and why.
 */
export class StoreOpenError extends Error {
  constructor(variable: 'DATA_DIR' | 'DATABASE_URL', where: string, why: string, options?: { cause: unknown }) {
    super(`${variable} (${where}): ${why}`, options);
    this.name = 'StoreOpenError';
  }
}

/** Why SQLite in `dataDir` could not be opened, for an operator: what is wrong with the folder or the file. */
export function sqliteOpenFailure(dataDir: string, file: string, err: unknown): StoreOpenError {
  if (err instanceof StoreOpenError) return err;
  const code = String((err as { code?: unknown } | null)?.code ?? '');
  const message = err instanceof Error ? err.message : String(err);
  let why: string;
  if (code === 'EEXIST' || code === 'ENOTDIR') why = `not a folder (${message}): set DATA_DIR to a folder`;
  else if (code === 'SQLITE_NOTADB')
    why = `${file} is not a SQLite database: move it away or set DATA_DIR to another folder (nothing was written to it)`;
  else if (
    ['EACCES', 'EPERM', 'EROFS', 'ENOENT', 'ENOSPC', 'EDQUOT'].includes(code) ||
    code.startsWith('SQLITE_CANTOPEN') ||
    code.startsWith('SQLITE_READONLY') ||
    code.startsWith('SQLITE_IOERR') ||
    code === 'SQLITE_FULL' ||
    code === 'SQLITE_PERM'
  )
    why = `not a writable folder with room for ${path.basename(file)} (${message}): set DATA_DIR to one`;
  else why = `${file} cannot be opened: ${message}`;
  return new StoreOpenError('DATA_DIR', dataDir, why, { cause: err });
}

/** The first 16 bytes of every SQLite database file. */
const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Refuses a `file` that exists, is not empty and does not begin as a SQLite database does, before the gateway writes
 * anything beside it (its lock, a WAL written ahead): SQLite would refuse it only once it opens it. Reads only; a
 * file that cannot be read is left for SQLite to report.
 */
export function refuseNotSqlite(dataDir: string, file: string): void {
  const header = Buffer.alloc(SQLITE_MAGIC.length);
  let read: number;
  try {
    const fd = fs.openSync(file, 'r');
    try {
      read = fs.readSync(fd, header, 0, header.length, 0);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return;
  }
  if (read === 0 || header.equals(SQLITE_MAGIC)) return;
  throw sqliteOpenFailure(dataDir, file, Object.assign(new Error('file is not a database'), { code: 'SQLITE_NOTADB' }));
}

/** The DATA_DIRs this process holds, each with its lock's connection and how many stores share it. */
const held = new Map<string, { lock: BetterSqlite3.Database; stores: number }>();

/**
 * One gateway process per DATA_DIR (docs/scaling.md: more than one process needs PostgreSQL). Two would each deliver
 * only the events they took to their own subscribers, and keep their own rate limits and bounds. The lock is SQLite's
 * exclusive lock on a file of its own (`gateway.lock`), held by a connection in EXCLUSIVE locking mode for as long as
 * it is open: the operating system drops it when the process ends, however it ends, so a crash leaves nothing stale.
 * Stores of one process (tests that start several gateways) share it. Returns what releases this store's hold.
 */
export function holdDataDir(SQLite: typeof BetterSqlite3, dataDir: string): () => void {
  const key = fs.realpathSync(dataDir);
  let entry = held.get(key);
  if (!entry) {
    const lock = new SQLite(path.join(dataDir, 'gateway.lock'), { timeout: 0 });
    try {
      lock.pragma('locking_mode = EXCLUSIVE');
      lock.exec('begin exclusive; commit');
    } catch (err) {
      lock.close();
      if ((err as { code?: unknown }).code === 'SQLITE_NOTADB')
        throw new StoreOpenError(
          'DATA_DIR',
          dataDir,
          `${path.join(dataDir, 'gateway.lock')} is not a SQLite database: it only marks the folder as in use and ` +
            'holds nothing, so remove it while no gateway runs on this folder (nothing was written to it)',
          { cause: err },
        );
      if ((err as { code?: unknown }).code === 'SQLITE_BUSY')
        throw new StoreOpenError(
          'DATA_DIR',
          dataDir,
          'in use by another gateway process: SQLite serves one process; stop the other one, give this one its own ' +
            'DATA_DIR, or run replicas on PostgreSQL (DATABASE_URL)',
          { cause: err },
        );
      throw err;
    }
    entry = { lock, stores: 0 };
    held.set(key, entry);
  }
  entry.stores += 1;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    entry.stores -= 1;
    if (entry.stores > 0) return;
    held.delete(key);
    entry.lock.close();
  };
}
