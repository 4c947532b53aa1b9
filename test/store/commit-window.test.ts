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

/** Lets the event loop run `n` full turns: a group committed at the end of its turn has settled by then. */
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

// SQLITE_COMMIT_WINDOW_MS (docs/decisions/062, 113): a group waits its window only while writes keep coming. The clock
// is vitest's (setTimeout and performance.now); the end of a turn (setImmediate) and SQLite are real.
describe('the commit window', () => {
  let dir: string;
  let database: SQLite.Database;
  let commits: number;
  let next: number;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'commit-window-'));
    database = new SQLite(path.join(dir, 'db.sqlite'));
    database.pragma('journal_mode = WAL');
    database.exec('create table items (id integer primary key)');
    commits = 0;
    next = 0;
    const exec = database.exec.bind(database);
    vi.spyOn(database, 'exec').mockImplementation((source: string) => {
      if (source === 'commit') commits += 1;
      return exec(source);
    });
  });

  afterEach(() => {
    vi.useRealTimers();
    database.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const writer = (commitWindowMs: number) => {
    const db = new Kysely<Db>({ dialect: new GroupCommitSqliteDialect(database, { commitWindowMs }) });
    return () => tracked(db.insertInto('items').values({ id: ++next }).execute());
  };

  it('commits a write after a quiet spell at the end of its turn, without waiting for the window', async () => {
    const write = writer(2);
    const first = write();
    await turnsOfTheLoop(3);
    expect(first.done()).toBe(true);
    expect(commits).toBe(1);
    // Long after (more than four windows): quiet again.
    vi.advanceTimersByTime(9);
    const later = write();
    await turnsOfTheLoop(3);
    expect(later.done()).toBe(true);
    expect(commits).toBe(2);
  });

  it('holds a group opened soon after the previous one for its window, and commits the writes that came meanwhile together', async () => {
    const write = writer(2);
    await write().write;
    expect(commits).toBe(1);
    // The next write comes 3 ms later: within four windows of the last group, so writes are taken to keep coming.
    vi.advanceTimersByTime(3);
    const b = write();
    await turnsOfTheLoop(5);
    expect(b.done()).toBe(false);
    expect(commits).toBe(1);
    // A write 1 ms later, in a later turn, joins the open group.
    vi.advanceTimersByTime(1);
    const c = write();
    await turnsOfTheLoop(5);
    expect(c.done()).toBe(false);
    expect(commits).toBe(1);
    // The window ends 2 ms after the group opened: one COMMIT for both.
    vi.advanceTimersByTime(1);
    await turnsOfTheLoop(3);
    expect([b.done(), c.done()]).toEqual([true, true]);
    expect(commits).toBe(2);
    const rows = database.prepare('select count(*) as n from items').get() as { n: number };
    expect(rows.n).toBe(3);
  });

  it('with a window of 0 commits every group at the end of its turn, however close the writes come', async () => {
    const write = writer(0);
    for (let i = 0; i < 4; i++) {
      const w = write();
      await turnsOfTheLoop(3);
      expect(w.done()).toBe(true);
      expect(commits).toBe(i + 1);
      vi.advanceTimersByTime(0.5);
    }
  });
});
