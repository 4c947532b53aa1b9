import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely } from 'kysely';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { GroupCommitSqliteDialect } from '../../src/store/sqlite-dialect.js';

interface Db {
  items: { id: number };
}

/** Lets the event loop run `n` full turns: a group committed at the end of its turn has committed by then. */
async function turnsOfTheLoop(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** A write's promise, and whether it has settled yet. */
function tracked(write: Promise<unknown>): { done: () => boolean; write: Promise<unknown> } {
  let settled = false;
  void write.then(
    () => (settled = true),
    () => (settled = true),
  );
  return { done: () => settled, write };
}

// SQLITE_COMMIT_WINDOW_MS (docs/decisions/062, 113, 159): a group waits its window only when writes have lately come
// from more than one caller at a time (one opened a group while another's sync was in flight, or a request arrived
// while a group was open). The clock is vitest's
// (setTimeout and performance.now); the fdatasyncs are real but held until the test lets them answer; the end of a
// turn (setImmediate) and SQLite are real.
describe('the commit window', () => {
  let dir: string;
  let database: SQLite.Database;
  let commits: number;
  let next: number;
  /** The fdatasyncs asked for and not yet let through. */
  let syncs: Array<() => void>;
  /** Called as each group opens (its BEGIN): a request arriving while the group is open. */
  let onBegin: (() => void) | null;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'commit-window-'));
    database = new SQLite(path.join(dir, 'db.sqlite'));
    database.pragma('journal_mode = WAL');
    database.pragma('synchronous = NORMAL');
    database.exec('create table items (id integer primary key)');
    commits = 0;
    next = 0;
    syncs = [];
    const exec = database.exec.bind(database);
    onBegin = null;
    vi.spyOn(database, 'exec').mockImplementation((source: string) => {
      if (source === 'commit') commits += 1;
      const done = exec(source);
      if (source === 'begin immediate') onBegin?.();
      return done;
    });
    const real = fs.fdatasync;
    vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
      syncs.push(() => real(fd, cb));
    }) as typeof fs.fdatasync);
  });

  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
    database.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const writer = (commitWindowMs: number, arrivals?: { count: number }) => {
    const db = new Kysely<Db>({
      dialect: new GroupCommitSqliteDialect(database, {
        commitWindowMs,
        syncWal: true,
        ...(arrivals ? { arrivals } : {}),
      }),
    });
    return () => tracked(db.insertInto('items').values({ id: ++next }).execute());
  };

  /** Lets the one sync asked for answer, and waits until the write it covers has settled. */
  async function syncAnswers(write: { write: Promise<unknown> }): Promise<void> {
    expect(syncs).toHaveLength(1);
    syncs.shift()!();
    await write.write;
  }

  it("never holds a lone caller's writes, however close they come: each commits at the end of its turn", async () => {
    const write = writer(2);
    for (let i = 0; i < 4; i++) {
      const w = write();
      await turnsOfTheLoop(3);
      expect(commits).toBe(i + 1);
      await syncAnswers(w);
      vi.advanceTimersByTime(0.5);
    }
  });

  it("holds a group for its window once a write came during another's sync, and commits what came meanwhile together", async () => {
    const write = writer(2);
    const a = write();
    await turnsOfTheLoop(3);
    expect(commits).toBe(1);
    // B comes while A's sync is in flight: a second caller. Its group is committed when that sync answers.
    const b = write();
    await turnsOfTheLoop(3);
    expect(commits).toBe(1);
    await syncAnswers(a);
    await turnsOfTheLoop(3);
    expect(commits).toBe(2);
    await syncAnswers(b);

    // 3 ms later (within eight windows), C opens a group with no sync in flight: it waits for its window.
    vi.advanceTimersByTime(3);
    const c = write();
    await turnsOfTheLoop(5);
    expect(commits).toBe(2);
    // D, 1 ms later in a later turn, joins C's group.
    vi.advanceTimersByTime(1);
    const d = write();
    await turnsOfTheLoop(5);
    expect([c.done(), d.done(), commits]).toEqual([false, false, 2]);
    // The window ends 2 ms after C: one COMMIT and one sync for both.
    vi.advanceTimersByTime(1);
    await turnsOfTheLoop(3);
    expect(commits).toBe(3);
    await syncAnswers(c);
    expect(d.done()).toBe(true);

    // After a quiet spell (more than eight windows since a write came during a sync), E commits in its turn.
    vi.advanceTimersByTime(17);
    const e = write();
    await turnsOfTheLoop(3);
    expect(commits).toBe(4);
    await syncAnswers(e);
    expect((database.prepare('select count(*) as n from items').get() as { n: number }).n).toBe(5);
  });

  it("never holds a lone caller's writes when the HTTP port is counted: no request arrives while its group is open", async () => {
    const arrivals = { count: 0 };
    const write = writer(2, arrivals);
    for (let i = 0; i < 4; i++) {
      arrivals.count += 1; // the caller's own request, before its write
      const w = write();
      await turnsOfTheLoop(3);
      expect(commits).toBe(i + 1);
      await syncAnswers(w);
      vi.advanceTimersByTime(0.5);
    }
  });

  it('holds a group for its window once a request arrived while a group was open, however fast the syncs', async () => {
    const arrivals = { count: 1 };
    const write = writer(2, arrivals);
    // Another caller's request arrives while A's group is open (before the end of its turn): a second caller.
    onBegin = () => {
      arrivals.count += 1;
      onBegin = null;
    };
    const a = write();
    await turnsOfTheLoop(3);
    expect(commits).toBe(1);
    await syncAnswers(a);

    // 3 ms later (within eight windows), with no sync in flight and none having overlapped a write, B waits its window.
    vi.advanceTimersByTime(3);
    const b = write();
    await turnsOfTheLoop(5);
    expect([b.done(), commits]).toEqual([false, 1]);
    vi.advanceTimersByTime(1);
    const c = write();
    await turnsOfTheLoop(5);
    expect([c.done(), commits]).toEqual([false, 1]);
    // The window ends 2 ms after B: one COMMIT and one sync for both.
    vi.advanceTimersByTime(1);
    await turnsOfTheLoop(3);
    expect(commits).toBe(2);
    await syncAnswers(b);
    expect(c.done()).toBe(true);

    // After a quiet spell, D commits in its turn again.
    vi.advanceTimersByTime(17);
    const d = write();
    await turnsOfTheLoop(3);
    expect(commits).toBe(3);
    await syncAnswers(d);
  });

  it('with a window of 0 commits every group at the end of its turn, even right after writes came together', async () => {
    const write = writer(0);
    const a = write();
    await turnsOfTheLoop(3);
    const b = write();
    await syncAnswers(a);
    await turnsOfTheLoop(3);
    await syncAnswers(b);
    const c = write();
    await turnsOfTheLoop(3);
    expect(commits).toBe(3);
    await syncAnswers(c);
  });
});
