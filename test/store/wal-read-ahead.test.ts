// SQLITE_WAL_READ_AHEAD_MB (docs/decisions/145): as each checkpoint begins, the worker reads into the kernel's cache
// the parts of the WAL ahead of where the writer goes next that lay unused, so that the writer's partial-page writes
// find their pages cached instead of reading each from the disk on the event loop. Here the reader's rule, on a real
// file with a controlled clock; then through the checkpoint worker of a real database.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import type { CheckpointReply } from '../../src/store/checkpoint-worker.js';
import { GroupCommitSqliteDialect } from '../../src/store/sqlite-dialect.js';
import { WAL_IDLE_MS, WalReadAhead } from '../../src/store/wal-read-ahead.js';
import { waitFor } from '../helpers/wait.js';

const MiB = 1024 * 1024;
/** A frame: a 24-byte header and a 4 KiB page; the WAL's own header is 32 bytes. */
const at = (frames: number) => 32 + frames * (24 + 4_096);

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A file of `bytes` standing for a WAL, and a reader of it whose clock the test moves. */
function reader(bytes: number, ahead: number, restartFrames = 1_000_000) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-read-ahead-'));
  dirs.push(dir);
  const file = path.join(dir, 'db.sqlite-wal');
  fs.writeFileSync(file, Buffer.alloc(bytes));
  const clock = { t: 0 };
  const readAhead = new WalReadAhead(file, 4_096, ahead, restartFrames, WAL_IDLE_MS, () => clock.t);
  return { readAhead, clock, file };
}

describe('the WAL read ahead of its writer', () => {
  it('reads nothing while the parts ahead were in use within the idle time', () => {
    const { readAhead, clock } = reader(8 * MiB, 2 * MiB);
    clock.t = WAL_IDLE_MS - 1;
    expect(readAhead.after(10, 5)).toBe(0);
    readAhead.close();
  });

  it('reads the idle parts within reach ahead of the writer, once, and not the parts the writer just filled', () => {
    const { readAhead, clock } = reader(8 * MiB, 2 * MiB);
    clock.t = WAL_IDLE_MS;
    // The writer ends in the first MiB, which it filled now: the second and third are read.
    expect(readAhead.after(10, 5)).toBe(2 * MiB);
    // Read now, they are not read again while in use; the writer moving into the second MiB reaches the fourth.
    clock.t += 1_000;
    expect(readAhead.after(300, 10)).toBe(1 * MiB);
    clock.t += 1_000;
    expect(readAhead.after(310, 300)).toBe(0);
    readAhead.close();
  });

  it('reads from the WAL’s start once every frame is copied, where the next write restarts it', () => {
    const { readAhead, clock } = reader(8 * MiB, 2 * MiB);
    clock.t = WAL_IDLE_MS;
    // The writer has filled the first four MiB now; the fifth and sixth are read ahead of it.
    expect(readAhead.after(1_000, 10)).toBe(2 * MiB);
    // Idle time later: the writer filled up to the sixth MiB and everything is copied. The WAL's first three MiB,
    // filled an idle time ago, are read: the next write goes there.
    clock.t += WAL_IDLE_MS;
    expect(at(1_500)).toBeLessThan(6 * MiB);
    expect(readAhead.after(1_500, 1_500)).toBe(3 * MiB);
    readAhead.close();
  });

  it('reads nothing when the restart’s hold comes next, nor with 0 bytes, and stops at the file’s end', () => {
    const held = reader(8 * MiB, 2 * MiB, 1_000);
    held.clock.t = 10 * WAL_IDLE_MS;
    expect(held.readAhead.after(1_000, 10)).toBe(0);
    held.readAhead.close();

    const off = reader(8 * MiB, 0);
    off.clock.t = 10 * WAL_IDLE_MS;
    expect(off.readAhead.after(10, 5)).toBe(0);
    // Off, it never opens the file: a WAL that is not there is no error.
    fs.rmSync(off.file);
    expect(off.readAhead.after(20, 5)).toBe(0);

    const short = reader(2 * MiB, 8 * MiB);
    short.clock.t = WAL_IDLE_MS;
    expect(short.readAhead.after(0, 0)).toBe(2 * MiB);
    short.readAhead.close();
  });
});

describe('SQLITE_WAL_READ_AHEAD_MB through the checkpoint worker', () => {
  it('is 32 MiB unless set, accepts 0 to 1,024, and refuses anything else', () => {
    expect(loadConfig({}).sqliteWalReadAheadMb).toBe(32);
    expect(loadConfig({ SQLITE_WAL_READ_AHEAD_MB: '0' }).sqliteWalReadAheadMb).toBe(0);
    expect(loadConfig({ SQLITE_WAL_READ_AHEAD_MB: '1024' }).sqliteWalReadAheadMb).toBe(1_024);
    for (const bad of ['-1', '1025', '2.5', 'lots'])
      expect(() => loadConfig({ SQLITE_WAL_READ_AHEAD_MB: bad })).toThrow(/SQLITE_WAL_READ_AHEAD_MB/);
  });

  // The same writes with the reading on (every part counted idle at once) and off: the worker reads the WAL only when
  // on, and the database holds the same rows either way.
  it.each([
    [2 * MiB, true],
    [0, false],
  ])('with %i bytes ahead, reads the WAL: %s; the rows are the same', async (readAheadBytes, reads) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-read-ahead-db-'));
    dirs.push(dir);
    const file = path.join(dir, 'db.sqlite');
    const database = new SQLite(file);
    database.pragma('journal_mode = WAL');
    database.pragma('synchronous = NORMAL');
    database.exec('create table items (id integer primary key, name text not null)');
    const replies: CheckpointReply[] = [];
    const dialect = new GroupCommitSqliteDialect(database, {
      syncWal: true,
      checkpointInWorker: true,
      checkpoint: { intervalMs: 5, readAheadBytes, readAheadIdleMs: 0, observe: (r) => replies.push(r) },
    });
    const db = new Kysely<{ items: { id: number; name: string } }>({ dialect });
    try {
      let id = 0;
      // The worker starts on its own (from the sources it loads tsx first): write until it has answered five times.
      await waitFor(
        async () => {
          await db
            .insertInto('items')
            .values({ id: ++id, name: 'x'.repeat(500) })
            .execute();
          return replies.length >= 5;
        },
        60_000,
        'five checkpoints',
      );
      expect(replies.every((r) => r.error === undefined)).toBe(true);
      const read = replies.at(-1)!.readAhead;
      if (reads) expect(read).toBeGreaterThan(0);
      else expect(read).toBe(0);
      const rows = await db.selectFrom('items').select(['id']).orderBy('id').execute();
      expect(rows.map((r) => r.id)).toEqual(Array.from({ length: id }, (_, i) => i + 1));
    } finally {
      await db.destroy();
    }
  });
});
