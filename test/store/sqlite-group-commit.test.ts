import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { Kysely, sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import type { CheckpointReply } from '../../src/store/checkpoint-worker.js';
import { openStore } from '../../src/store/index.js';
import { GroupCommitSqliteDialect, type CheckpointOptions } from '../../src/store/sqlite-dialect.js';
import { waitFor } from '../helpers/wait.js';

interface Db {
  items: { id: number; name: string };
}

/**
 * Lets the event loop run `n` full turns (no clock): what would settle the promise without the held fdatasync (a
 * microtask, an I/O callback, an immediate) has run by then.
 */
async function turnsOfTheLoop(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

describe('SQLite group commit: a write is acknowledged only once it is committed', () => {
  let dir: string;
  let file: string;
  let database: SQLite.Database;
  let db: Kysely<Db>;
  let dialect: GroupCommitSqliteDialect;
  /** A second, independent connection: it sees only what is committed. */
  let observer: SQLite.Database;
  let execs: string[];

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'group-commit-'));
    file = path.join(dir, 'db.sqlite');
    database = new SQLite(file);
    database.pragma('journal_mode = WAL');
    database.pragma('synchronous = FULL');
    database.exec('create table items (id integer primary key, name text not null)');
    execs = [];
    const exec = database.exec.bind(database);
    vi.spyOn(database, 'exec').mockImplementation((source: string) => {
      execs.push(source);
      return exec(source);
    });
    dialect = new GroupCommitSqliteDialect(database);
    db = new Kysely<Db>({ dialect });
    observer = new SQLite(file, { readonly: true });
  });

  afterEach(async () => {
    observer.close();
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const committed = () => (observer.prepare('select count(*) as n from items').get() as { n: number }).n;

  it('commits the writes of one turn of the event loop together, once', async () => {
    const writes = Array.from({ length: 10 }, (_, i) =>
      db
        .insertInto('items')
        .values({ id: i + 1, name: `n${i}` })
        .execute(),
    );
    await Promise.all(writes);
    expect(execs.filter((s) => s === 'commit')).toHaveLength(1);
    expect(committed()).toBe(10);
  });

  it('settles a write only after its COMMIT: another connection already sees it', async () => {
    let seenAtResolve = -1;
    const write = db
      .insertInto('items')
      .values({ id: 1, name: 'a' })
      .execute()
      .then(() => {
        seenAtResolve = committed();
      });
    // The statement has run (or is about to) but nothing is committed yet.
    await Promise.resolve();
    expect(committed()).toBe(0);
    await write;
    expect(seenAtResolve).toBe(1);
  });

  it('rejects a failing statement alone; the other writes of its turn are committed', async () => {
    await db.insertInto('items').values({ id: 1, name: 'first' }).execute();
    const results = await Promise.allSettled([
      db.insertInto('items').values({ id: 2, name: 'b' }).execute(),
      db.insertInto('items').values({ id: 1, name: 'duplicate' }).execute(),
      db.insertInto('items').values({ id: 3, name: 'c' }).execute(),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(committed()).toBe(3);
    expect((observer.prepare('select name from items where id = 1').get() as { name: string }).name).toBe('first');
  });

  it('answers a read issued while writes are pending only after they are committed', async () => {
    const order: string[] = [];
    const write = db
      .insertInto('items')
      .values({ id: 1, name: 'a' })
      .execute()
      .then(() => order.push('write'));
    const read = db
      .selectFrom('items')
      .selectAll()
      .execute()
      .then((rows) => {
        order.push('read');
        return rows;
      });
    const [, rows] = await Promise.all([write, read]);
    expect(order).toEqual(['write', 'read']);
    expect(committed()).toBe(1);
    expect(rows).toEqual([{ id: 1, name: 'a' }]);
  });

  it('commits pending writes before an explicit transaction, which then runs alone', async () => {
    const before = db.insertInto('items').values({ id: 1, name: 'before' }).execute();
    const tx = db.transaction().execute(async (trx) => {
      await trx.insertInto('items').values({ id: 2, name: 'in tx' }).execute();
      // Another writer outside the transaction waits for it to end.
      expect(committed()).toBe(1);
      await trx.insertInto('items').values({ id: 3, name: 'in tx' }).execute();
    });
    const outside = db.insertInto('items').values({ id: 4, name: 'outside' }).execute();
    await Promise.all([before, tx, outside]);
    expect(committed()).toBe(4);
  });

  it('rolls an explicit transaction back as a whole', async () => {
    await expect(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('items').values({ id: 1, name: 'gone' }).execute();
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    await db.insertInto('items').values({ id: 2, name: 'kept' }).execute();
    expect(committed()).toBe(1);
  });

  it("writes statements together in the turn's one COMMIT, and undoes all of them when one fails", async () => {
    const insert = (id: number, name: string) => db.insertInto('items').values({ id, name }).compile();
    const other = db.insertInto('items').values({ id: 1, name: 'other' }).execute();
    const together = dialect.writeTogether(insert(2, 'b'), [insert(3, 'c')]);
    await Promise.all([other, together]);
    expect(execs.filter((s) => s === 'commit')).toHaveLength(1);
    expect(committed()).toBe(3);

    // id 1 exists: the second statement fails, and the first of the unit is undone with it; the turn's other write stays.
    const results = await Promise.allSettled([
      dialect.writeTogether(insert(4, 'd'), [insert(1, 'duplicate')]),
      db.insertInto('items').values({ id: 5, name: 'e' }).execute(),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect((observer.prepare('select id from items order by id').all() as { id: number }[]).map((r) => r.id)).toEqual([
      1, 2, 3, 5,
    ]);
  });

  it('writes nothing of a unit one of whose following statements changes no row, and names it', async () => {
    const rename = (id: number, name: string) => db.updateTable('items').set({ name }).where('id', '=', id).compile();
    const insertNew = (id: number, name: string) =>
      db
        .insertInto('items')
        .values({ id, name })
        .onConflict((oc) => oc.column('id').doNothing())
        .compile();
    await db.insertInto('items').values({ id: 1, name: 'a' }).execute();
    // Item 1 exists: the unit's second insert changes no row, and the whole unit is undone; the turn's other write
    // stays.
    const results = await Promise.all([
      dialect.writeTogether(rename(1, 'renamed'), [insertNew(2, 'b'), insertNew(1, 'again')]),
      db.insertInto('items').values({ id: 4, name: 'd' }).execute(),
    ]);
    expect(results[0]).toEqual({ unapplied: 1 });
    expect(observer.prepare('select id, name from items order by id').all()).toEqual([
      { id: 1, name: 'a' },
      { id: 4, name: 'd' },
    ]);
  });

  it('writes nothing of a unit whose first statement changes no row, and says so', async () => {
    const rename = (id: number, name: string) => db.updateTable('items').set({ name }).where('id', '=', id).compile();
    const insert = (id: number, name: string) => db.insertInto('items').values({ id, name }).compile();
    await db.insertInto('items').values({ id: 1, name: 'a' }).execute();
    expect(await dialect.writeTogether(rename(1, 'renamed'), [insert(2, 'b')])).toBe(true);
    // No item 9: the unit's second statement is not written either; the turn's other write is.
    const results = await Promise.all([
      dialect.writeTogether(rename(9, 'none'), [insert(3, 'c')]),
      db.insertInto('items').values({ id: 4, name: 'd' }).execute(),
    ]);
    expect(results[0]).toBe(false);
    expect(observer.prepare('select id, name from items order by id').all()).toEqual([
      { id: 1, name: 'renamed' },
      { id: 2, name: 'b' },
      { id: 4, name: 'd' },
    ]);
  });

  it('re-uses prepared statements instead of preparing every query again', async () => {
    const prepare = vi.spyOn(database, 'prepare');
    for (let i = 0; i < 5; i++) await db.selectFrom('items').selectAll().where('id', '=', i).execute();
    expect(prepare).toHaveBeenCalledTimes(1);
  });
});

describe('SQLITE_SYNCHRONOUS', () => {
  it('is FULL unless set, accepts NORMAL in any case, and refuses anything else', () => {
    expect(loadConfig({}).sqliteSynchronous).toBe('FULL');
    expect(loadConfig({ SQLITE_SYNCHRONOUS: 'normal' }).sqliteSynchronous).toBe('NORMAL');
    expect(() => loadConfig({ SQLITE_SYNCHRONOUS: 'OFF' })).toThrow(/SQLITE_SYNCHRONOUS: must be FULL or NORMAL/);
  });

  it('FULL syncs the WAL before a write settles, off the event loop; NORMAL does not sync at commit', async () => {
    for (const mode of ['NORMAL', 'FULL'] as const) {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sync-'));
      const store = await openStore({ dataDir, logger: createLogger({ level: 'silent' }), sqliteSynchronous: mode });
      const synced: string[] = [];
      const real = fs.fdatasync;
      const spy = vi.spyOn(fs, 'fdatasync').mockImplementation(((
        fd: number,
        cb: (err: NodeJS.ErrnoException | null) => void,
      ) => {
        real(fd, (err) => {
          synced.push(fs.readlinkSync(`/proc/self/fd/${fd}`));
          cb(err);
        });
      }) as typeof fs.fdatasync);
      try {
        // The COMMIT itself never fsyncs (the event loop is not blocked by the disk); FULL's sync is the driver's.
        const { rows } = await sql<{ synchronous: number }>`pragma synchronous`.execute(store.db);
        expect(rows[0]!.synchronous).toBe(1);
        let settled = -1;
        const write = sql`create table t (x integer)`.execute(store.db).then(() => (settled = synced.length));
        await write;
        if (mode === 'FULL') {
          expect(settled).toBe(1);
          expect(synced[0]).toBe(path.join(dataDir, 'gateway.sqlite-wal'));
        } else {
          expect(synced).toEqual([]);
        }
      } finally {
        spy.mockRestore();
        await store.close();
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    }
  });
});

describe('SQLite group commit with the WAL synced by the driver (FULL without blocking the event loop)', () => {
  let dir: string;
  let file: string;
  let database: SQLite.Database;
  let db: Kysely<Db>;
  let dialect: GroupCommitSqliteDialect;
  let observer: SQLite.Database;
  /** Pending fdatasync callbacks: the test decides when the disk "answers". */
  let syncs: Array<() => void>;
  let commits: number;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'group-commit-sync-'));
    file = path.join(dir, 'db.sqlite');
    database = new SQLite(file);
    database.pragma('journal_mode = WAL');
    database.pragma('synchronous = NORMAL');
    database.exec('create table items (id integer primary key, name text not null)');
    commits = 0;
    const exec = database.exec.bind(database);
    vi.spyOn(database, 'exec').mockImplementation((source: string) => {
      if (source === 'commit') commits += 1;
      return exec(source);
    });
    syncs = [];
    const real = fs.fdatasync;
    vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
      syncs.push(() => real(fd, cb));
    }) as typeof fs.fdatasync);
    dialect = new GroupCommitSqliteDialect(database, { syncWal: true });
    db = new Kysely<Db>({ dialect });
    observer = new SQLite(file, { readonly: true });
  });

  afterEach(async () => {
    vi.restoreAllMocks();
    observer.close();
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const committed = () => (observer.prepare('select count(*) as n from items').get() as { n: number }).n;
  // Waits for the state (the deadline only bounds a failure; a loaded machine may take long to get there).
  const until = (check: () => boolean) => waitFor(check, 20_000);

  it('settles a write only after the fdatasync that follows its COMMIT has returned', async () => {
    let settled = false;
    const write = db
      .insertInto('items')
      .values({ id: 1, name: 'a' })
      .execute()
      .then(() => (settled = true));
    await until(() => syncs.length === 1);
    // Committed (another connection sees it) but not yet on disk: not acknowledged.
    expect(committed()).toBe(1);
    await turnsOfTheLoop(3);
    expect(settled).toBe(false);
    syncs.shift()!();
    await write;
    expect(settled).toBe(true);
  });

  it('holds the answer of a read that sees a commit not yet synced', async () => {
    const write = db.insertInto('items').values({ id: 1, name: 'a' }).execute();
    await until(() => syncs.length === 1);
    let read: unknown = null;
    const reading = db
      .selectFrom('items')
      .selectAll()
      .execute()
      .then((rows) => (read = rows));
    await turnsOfTheLoop(3);
    expect(read).toBe(null);
    syncs.shift()!();
    await Promise.all([write, reading]);
    expect(read).toEqual([{ id: 1, name: 'a' }]);
  });

  it('keeps the writes that arrive during a sync in one transaction, committed and synced when it returns', async () => {
    const first = db.insertInto('items').values({ id: 1, name: 'a' }).execute();
    await until(() => syncs.length === 1);
    expect(commits).toBe(1);
    const later: Promise<unknown>[] = [];
    for (let turn = 0; turn < 3; turn++) {
      later.push(
        db
          .insertInto('items')
          .values({ id: 10 + turn, name: 'later' })
          .execute(),
      );
      await new Promise((r) => setImmediate(r));
    }
    // Three turns went by: no COMMIT while the first sync is in flight.
    expect(commits).toBe(1);
    expect(committed()).toBe(1);
    syncs.shift()!();
    await first;
    await until(() => syncs.length === 1);
    expect(commits).toBe(2);
    expect(committed()).toBe(4);
    syncs.shift()!();
    await Promise.all(later);
  });

  it('an explicit transaction settles after the sync of its COMMIT', async () => {
    let settled = false;
    const tx = db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto('items').values({ id: 1, name: 'tx' }).execute();
      })
      .then(() => (settled = true));
    await until(() => syncs.length === 1);
    expect(committed()).toBe(1);
    expect(settled).toBe(false);
    syncs.shift()!();
    await tx;
    expect(settled).toBe(true);
  });

  it('settles a visible write at its COMMIT with no sync of its own; the next sync someone waits for covers it', async () => {
    const insert = (id: number) => db.insertInto('items').values({ id, name: 'v' }).compile();
    await dialect.executeVisible(insert(1));
    // Committed, acknowledged, and no sync asked for (none even started).
    expect(commits).toBe(1);
    expect(committed()).toBe(1);
    await turnsOfTheLoop(3);
    expect(syncs).toHaveLength(0);
    // A read that sees only the visible commit waits for no sync (and starts none).
    expect(await db.selectFrom('items').select('id').execute()).toEqual([{ id: 1 }]);
    expect(syncs).toHaveLength(0);

    // A write that waits for its sync: one sync, after its COMMIT, covering both (the WAL is written in order).
    let settled = false;
    const durable = db
      .insertInto('items')
      .values({ id: 2, name: 'd' })
      .execute()
      .then(() => (settled = true));
    await until(() => syncs.length === 1);
    expect(commits).toBe(2);
    await turnsOfTheLoop(3);
    expect(settled).toBe(false);
    syncs.shift()!();
    await durable;
    await turnsOfTheLoop(3);
    expect(syncs).toHaveLength(0);
  });

  it('in a group with a write that waits for its sync, a visible write still settles at the COMMIT', async () => {
    const order: string[] = [];
    const durable = db
      .insertInto('items')
      .values({ id: 1, name: 'd' })
      .execute()
      .then(() => order.push('durable'));
    const visible = dialect
      .executeVisible(db.insertInto('items').values({ id: 2, name: 'v' }).compile())
      .then(() => order.push('visible'));
    await visible;
    expect(commits).toBe(1);
    expect(syncs).toHaveLength(1);
    expect(order).toEqual(['visible']);
    // A read now sees the group's durable write too: it waits for the sync.
    let read: unknown = null;
    const reading = db
      .selectFrom('items')
      .select('id')
      .execute()
      .then((rows) => (read = rows));
    await turnsOfTheLoop(3);
    expect(read).toBe(null);
    syncs.shift()!();
    await Promise.all([durable, reading]);
    expect(order).toEqual(['visible', 'durable']);
    expect(read).toEqual([{ id: 1 }, { id: 2 }]);
  });

  it('refuses every later statement once a sync has failed', async () => {
    vi.mocked(fs.fdatasync).mockImplementation(((_fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
      setImmediate(() => cb(Object.assign(new Error('EIO: i/o error'), { code: 'EIO' })));
    }) as typeof fs.fdatasync);
    await expect(db.insertInto('items').values({ id: 1, name: 'a' }).execute()).rejects.toThrow(/could not be synced/);
    await expect(db.insertInto('items').values({ id: 2, name: 'b' }).execute()).rejects.toThrow(/could not be synced/);
  });
});

describe('SQLITE_CHECKPOINT_INTERVAL_MS', () => {
  it('is 500 ms unless set, and refuses what is not a whole number of milliseconds from 10 to 60,000', () => {
    expect(loadConfig({}).sqliteCheckpointIntervalMs).toBe(500);
    expect(loadConfig({ SQLITE_CHECKPOINT_INTERVAL_MS: '100' }).sqliteCheckpointIntervalMs).toBe(100);
    for (const bad of ['5', '60001', '1.5', 'soon'])
      expect(() => loadConfig({ SQLITE_CHECKPOINT_INTERVAL_MS: bad })).toThrow(
        /SQLITE_CHECKPOINT_INTERVAL_MS: must be an integer from 10 to 60000/,
      );
  });
});

describe('SQLITE_WAL_RESTART_FRAMES', () => {
  it('is 65,536 frames unless set, and refuses what is not a whole number of frames from 1,024 to 1,048,576', () => {
    expect(loadConfig({}).sqliteWalRestartFrames).toBe(65_536);
    expect(loadConfig({ SQLITE_WAL_RESTART_FRAMES: '16384' }).sqliteWalRestartFrames).toBe(16_384);
    for (const bad of ['1023', '1048577', '2048.5', '64MiB', '-1'])
      expect(() => loadConfig({ SQLITE_WAL_RESTART_FRAMES: bad })).toThrow(
        /SQLITE_WAL_RESTART_FRAMES: must be an integer from 1024 to 1048576/,
      );
  });
});

describe('SQLITE_CHECKPOINT_SYNC', () => {
  it('is on unless set, accepts false, and refuses what is not a boolean', () => {
    expect(loadConfig({}).sqliteCheckpointSync).toBe(true);
    expect(loadConfig({ SQLITE_CHECKPOINT_SYNC: 'false' }).sqliteCheckpointSync).toBe(false);
    expect(() => loadConfig({ SQLITE_CHECKPOINT_SYNC: 'sometimes' })).toThrow(/SQLITE_CHECKPOINT_SYNC/);
  });
});

describe('SQLITE_CHECKPOINT_NICE', () => {
  it('is 10 steps unless set, accepts 0 to 19, and refuses anything else', () => {
    expect(loadConfig({}).sqliteCheckpointNice).toBe(10);
    expect(loadConfig({ SQLITE_CHECKPOINT_NICE: '0' }).sqliteCheckpointNice).toBe(0);
    expect(loadConfig({ SQLITE_CHECKPOINT_NICE: '19' }).sqliteCheckpointNice).toBe(19);
    for (const bad of ['-1', '20', '2.5', 'low'])
      expect(() => loadConfig({ SQLITE_CHECKPOINT_NICE: bad })).toThrow(
        /SQLITE_CHECKPOINT_NICE: must be an integer from 0 to 19/,
      );
  });
});

describe('SQLite checkpoints in a worker thread', () => {
  /** A database in a new directory, WAL with FULL's sync off the event loop, checkpointed by the worker. */
  function checkpointed(checkpoint: CheckpointOptions) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'checkpoint-'));
    const file = path.join(dir, 'db.sqlite');
    const database = new SQLite(file);
    database.pragma('journal_mode = WAL');
    database.pragma('synchronous = NORMAL');
    database.exec('create table items (id integer primary key, name text not null)');
    const dialect = new GroupCommitSqliteDialect(database, { syncWal: true, checkpointInWorker: true, checkpoint });
    return { dir, file, database, db: new Kysely<Db>({ dialect }) };
  }

  // Two restart sizes, a small one and one eight times larger (SQLITE_WAL_RESTART_FRAMES's default and the size it
  // replaced, scaled down): each keeps the WAL within its own bound, counted in bytes; the small one also with the
  // worker's sync of the database file off (SQLITE_CHECKPOINT_SYNC=false), which must not change what is kept.
  it.each([
    [50, true],
    [400, true],
    [50, false],
  ])(
    'turns the automatic checkpoint off, checkpoints from the worker and restarts the WAL under steady writes (restart at %i frames, database synced by the worker: %s)',
    async (restartFrames, syncDatabase) => {
      const { dir, file, database, db } = checkpointed({ intervalMs: 5, restartFrames, syncDatabase });
      try {
        expect(database.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
        const walSize = () => fs.statSync(`${file}-wal`).size;
        // Salt-1 of the WAL header (bytes 16–19) changes each time SQLite restarts the WAL from its beginning.
        const salt = () => {
          const fd = fs.openSync(`${file}-wal`, 'r');
          try {
            const header = Buffer.alloc(32);
            fs.readSync(fd, header, 0, 32, 0);
            return header.readUInt32BE(16);
          } finally {
            fs.closeSync(fd);
          }
        };
        const name = 'x'.repeat(3000);
        // The worker thread starts on its own (from the sources it loads tsx first, which a busy machine makes slow):
        // wait for its first restart of the WAL, writing meanwhile, before measuring what it keeps the WAL to.
        const before = salt();
        let warmUp = 10_000;
        await waitFor(
          async () => {
            await db.insertInto('items').values({ id: ++warmUp, name }).execute();
            return salt() !== before;
          },
          60_000,
          "the checkpoint worker's first restart of the WAL",
        );
        let largest = 0;
        const salts = new Set<number>();
        // 1,000 writes one after another, each its own commit of a ~3 KB row: kept in the WAL they would fill about
        // 8 MB (600 filled over 5 MB, measured with the restart off), and without the worker nothing is ever copied or
        // restarted (the automatic checkpoint is off). The bound: the restart size and 900 frames of slack (what this
        // test allowed at 50 frames: 4 MB), for writes made while a checkpoint runs late on a busy machine; a frame is
        // a 4,096-byte page and a 24-byte header.
        for (let i = 1; i <= 1_000; i++) {
          await db.insertInto('items').values({ id: i, name }).execute();
          largest = Math.max(largest, walSize());
          salts.add(salt());
        }
        expect(salts.size).toBeGreaterThanOrEqual(2);
        expect(largest).toBeLessThan((restartFrames + 900) * (4_096 + 24));
        expect(fs.statSync(file).size).toBeGreaterThan(50 * 3000);
      } finally {
        await db.destroy();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  // Linux gives each thread its own nice value (the 19th field of /proc/self/task/<tid>/stat). The worker's thread is
  // the one new thread at the event loop's nice plus the steps asked for; with 0 no new thread runs at another nice
  // (libuv's pool, started by the first WAL sync, has the event loop's).
  it.runIf(fs.existsSync('/proc/thread-self'))(
    "runs the worker's thread the nice steps asked for below the event loop, or at its priority with 0",
    async () => {
      const niceOf = () =>
        new Map(
          fs.readdirSync('/proc/self/task').map((tid) => {
            const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
            return [tid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])] as const;
          }),
        );
      const loop = niceOf().get(String(process.pid))!;
      expect(loop).toBeLessThanOrEqual(16);
      for (const nice of [3, 0]) {
        const before = niceOf();
        let answered!: () => void;
        const firstAnswer = new Promise<void>((resolve) => (answered = resolve));
        const { dir, db } = checkpointed({ intervalMs: 10, nice, observe: () => answered() });
        try {
          await db.insertInto('items').values({ id: 1, name: 'a' }).execute();
          // The worker lowers its priority before it takes its first request, so it has once it answers.
          await firstAnswer;
          const started = [...niceOf()].filter(([tid]) => !before.has(tid));
          const lowered = started.filter(([, n]) => n !== loop).map(([, n]) => n);
          expect(lowered).toEqual(nice === 0 ? [] : [loop + nice]);
        } finally {
          await db.destroy();
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }
    },
  );

  // A checkpoint comes at most every interval; the commits made within one are copied when it ends, though no commit
  // follows them (a burst's last frames are not left for the next burst's first checkpoint). vitest's clock moves the
  // interval (setTimeout and performance.now); the worker, its copies and SQLite are real.
  it('copies the last commits of a burst once the interval ends, with no commit after them', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const replies: CheckpointReply[] = [];
    let answered = () => {};
    // The checkpoints asked of the worker: one asked for is answered in its time, which the test waits for.
    let asked = 0;
    const post = Worker.prototype.postMessage;
    const spy = vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (
      this: Worker,
      message,
      transfer,
    ) {
      if (message === 'checkpoint') asked += 1;
      return post.call(this, message, transfer);
    });
    const { dir, db } = checkpointed({
      intervalMs: 1_000,
      restartFrames: 1_000_000,
      observe: (r) => {
        replies.push(r);
        answered();
      },
    });
    /** The worker's next answer, or a failure after 20 s of real time (node:timers/promises is not faked). */
    const nextReply = () =>
      Promise.race([
        new Promise<void>((resolve) => (answered = resolve)),
        sleep(20_000).then(() => {
          throw new Error(`no checkpoint after ${replies.length} answers`);
        }),
      ]);
    try {
      let id = 0;
      const write = () => db.insertInto('items').values({ id: ++id, name: 'x' }).execute();
      // No checkpoint yet, and more than an interval since the clock's start: the first commit asks for one at once.
      await vi.advanceTimersByTimeAsync(1_000);
      let answer = nextReply();
      await write();
      await answer;
      expect(replies).toHaveLength(1);
      expect(replies[0]!.log).toBeGreaterThan(0);
      expect(replies[0]!.checkpointed).toBe(replies[0]!.log);
      // Two commits within the interval, then none: nothing is asked for before the interval ends, and then at once.
      await write();
      await write();
      answer = nextReply();
      await vi.advanceTimersByTimeAsync(999);
      // Whatever was asked of the worker so far has been answered: a checkpoint asked for early would show here.
      while (replies.length < asked) await nextReply();
      expect(replies).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      await answer;
      expect(replies).toHaveLength(2);
      expect(replies[1]!.error).toBeUndefined();
      // The two commits' frames (the WAL restarted at the first of them, every frame before it being copied), all copied.
      expect(replies[1]!.log).toBeGreaterThan(0);
      expect(replies[1]!.checkpointed).toBe(replies[1]!.log);
    } finally {
      spy.mockRestore();
      vi.useRealTimers();
      await db.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  // SQLite syncs the database file only after a checkpoint whose copy reached the WAL's end (under load, only in the
  // restart's hold); the worker syncs it after every checkpoint that copied pages (decision 136). A reader that holds
  // an old snapshot stops a PASSIVE checkpoint at that snapshot: after the copy up to it, the next ones copy nothing.
  it.each([true, false])(
    'syncs the database file after each checkpoint that copied pages when asked (%s), and after none that copied nothing',
    async (syncDatabase) => {
      const replies: CheckpointReply[] = [];
      const { dir, file, db } = checkpointed({
        intervalMs: 5,
        restartFrames: 1_000_000,
        syncDatabase,
        observe: (r) => replies.push(r),
      });
      const reader = new SQLite(file, { readonly: true });
      try {
        let id = 0;
        const write = () =>
          db
            .insertInto('items')
            .values({ id: ++id, name: 'x'.repeat(500) })
            .execute();
        await write();
        // The reader's snapshot: everything written so far, and nothing after.
        reader.exec('begin');
        expect((reader.prepare('select count(*) as n from items').get() as { n: number }).n).toBe(1);
        // Two answers in a row with the same count: the copy reached the reader's snapshot, then copied nothing.
        const stalled = () =>
          replies.findIndex((r, i) => i > 0 && r.checkpointed > 0 && r.checkpointed === replies[i - 1]!.checkpointed);
        await waitFor(
          async () => {
            await write();
            return stalled() > 0;
          },
          60_000,
          'a checkpoint stopped at the reader',
        );
        const at = stalled();
        expect(replies.slice(0, at + 1).every((r) => !r.error)).toBe(true);
        expect(replies[at - 1]!.synced).toBe(syncDatabase);
        expect(replies[at]!.synced).toBe(false);
        const reached = replies[at]!.checkpointed;
        reader.exec('commit');
        await waitFor(
          async () => {
            await write();
            return replies.some((r) => r.checkpointed > reached);
          },
          60_000,
          'a checkpoint past the reader',
        );
        expect(replies.find((r) => r.checkpointed > reached)!.synced).toBe(syncDatabase);
      } finally {
        reader.close();
        await db.destroy();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
