// SQLITE_WAL_PREALLOCATE (docs/decisions/141): where no WAL exists, the store writes it ahead at its full size as
// zeros before SQLite opens the database. SQLite must take it as an empty WAL, write its frames over it without the
// file growing, recover every commit from it after a crash, and a WAL that exists must never be touched.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';
import { preallocateWal } from '../../src/store/wal-preallocate.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** The smallest restart size the configuration takes; the WAL is written ahead at it and an eighth more. */
const RESTART_FRAMES = 1_024;
const FRAMES = RESTART_FRAMES + RESTART_FRAMES / 8;
/** A WAL's header (32 bytes) and its frames (a 24-byte header and a 4 KiB page each). */
const walBytes = (frames: number) => 32 + frames * (24 + 4_096);
const logger = createLogger({ level: 'silent' });

const dirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-preallocate-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const walOf = (dataDir: string) => path.join(dataDir, 'gateway.sqlite-wal');
/** SQLite's WAL magic number (either byte order of its checksums), from the header's first four bytes. */
const sqliteHeader = (file: string) => (fs.readFileSync(file).readUInt32BE(0) & 0xfffffffe) === 0x377f0682;

/** The store on `dataDir` at the smallest restart size, the WAL written ahead (true), set off (false) or left unset. */
const open = (dataDir: string, preallocate?: boolean) =>
  openStore({
    dataDir,
    logger,
    sqliteWalRestartFrames: RESTART_FRAMES,
    ...(preallocate === undefined ? {} : { sqliteWalPreallocate: preallocate }),
  });

/** The rows of table t, and SQLite's integrity check of the whole database. */
async function rowsAndIntegrity(store: Store): Promise<{ rows: number; integrity: unknown[] }> {
  const { rows } = await sql<{ n: number }>`select count(*) as n from t`.execute(store.db);
  const check = await sql<{ integrity_check: string }>`pragma integrity_check`.execute(store.db);
  return { rows: rows[0]!.n, integrity: check.rows };
}

async function writeRows(dataDir: string, preallocate: boolean, rows: number): Promise<string[]> {
  const store = await open(dataDir, preallocate);
  try {
    await sql`create table t (x integer primary key, v text not null)`.execute(store.db);
    for (let i = 0; i < rows; i++) await sql`insert into t values (${i}, ${`row ${i} `.repeat(40)})`.execute(store.db);
    const read = await sql<{ v: string }>`select v from t order by x`.execute(store.db);
    return read.rows.map((r) => r.v);
  } finally {
    await store.close();
  }
}

describe('the WAL written ahead at its full size (SQLITE_WAL_PREALLOCATE)', () => {
  it('writes a new database’s WAL ahead as zeros; SQLite writes over it, and a clean stop keeps it', async () => {
    const dataDir = tempDir();
    const store = await open(dataDir, true);
    try {
      const wal = walOf(dataDir);
      // The migrations have committed: the header is SQLite's own now, and the file is the size written ahead.
      expect(sqliteHeader(wal)).toBe(true);
      expect(fs.statSync(wal).size).toBe(walBytes(FRAMES));
      await sql`create table t (x integer primary key, v text not null)`.execute(store.db);
      for (let i = 0; i < 300; i++) await sql`insert into t values (${i}, ${'v'.repeat(300)})`.execute(store.db);
      expect(fs.statSync(wal).size).toBe(walBytes(FRAMES));
      const { rows } = await sql<{ n: number }>`select count(*) as n from t`.execute(store.db);
      expect(rows[0]!.n).toBe(300);
    } finally {
      await store.close();
    }
    // A clean close copies every frame and SQLite deletes the WAL; its blocks stay under a second name, its header
    // zeroed, and the next start links that file in again instead of writing ~300 MB.
    const wal = walOf(dataDir);
    expect(fs.existsSync(wal)).toBe(false);
    const kept = fs.statSync(`${wal}.kept`);
    expect(kept.size).toBe(walBytes(FRAMES));
    expect(
      fs
        .readFileSync(`${wal}.kept`)
        .subarray(0, 32)
        .every((b) => b === 0),
    ).toBe(true);
    const again = await open(dataDir, true);
    try {
      expect(fs.statSync(wal).ino).toBe(kept.ino);
      expect(fs.existsSync(`${wal}.kept`)).toBe(false);
      expect(fs.statSync(wal).size).toBe(walBytes(FRAMES));
      await sql`insert into t values (300, ${'v'.repeat(300)})`.execute(again.db);
      const { rows } = await sql<{ n: number }>`select count(*) as n from t`.execute(again.db);
      expect(rows[0]!.n).toBe(301);
    } finally {
      await again.close();
    }
    // Set off, the kept file is removed: it is only disk space then.
    const off = await open(dataDir, false);
    await off.close();
    expect(fs.existsSync(`${wal}.kept`)).toBe(false);
  });

  it('zeroes the header of a kept WAL a crash left valid before it links it in, and loses nothing', async () => {
    const dataDir = tempDir();
    const wal = walOf(dataDir);
    const store = await open(dataDir, true);
    let header: Buffer;
    try {
      await sql`create table t (x integer primary key, v text not null)`.execute(store.db);
      for (let i = 0; i < 100; i++) await sql`insert into t values (${i}, ${'k'.repeat(300)})`.execute(store.db);
      header = fs.readFileSync(wal).subarray(0, 32);
    } finally {
      await store.close();
    }
    // As if the process had died after SQLite deleted the WAL and before the kept file's header was zeroed: that
    // header is SQLite's, its frames all copied already. Linked in as it is, SQLite would read them back.
    const fd = fs.openSync(`${wal}.kept`, 'r+');
    fs.writeSync(fd, header, 0, 32, 0);
    fs.closeSync(fd);
    expect(sqliteHeader(`${wal}.kept`)).toBe(true);
    const again = await open(dataDir, true);
    try {
      expect(await rowsAndIntegrity(again)).toEqual({ rows: 100, integrity: [{ integrity_check: 'ok' }] });
      // The header was zeroed before SQLite opened the file: it has written its own since, with new salts.
      await sql`insert into t values (100, 'after')`.execute(again.db);
      expect(fs.readFileSync(wal).subarray(16, 24)).not.toEqual(header.subarray(16, 24));
    } finally {
      await again.close();
    }
  });

  it('stores and reads the same rows as a WAL that grows (the off switch), and is off for `migrate`', async () => {
    const ahead = tempDir();
    const grown = tempDir();
    const withIt = await writeRows(ahead, true, 200);
    expect(withIt).toHaveLength(200);
    expect(await writeRows(grown, false, 200)).toEqual(withIt);
    // Off (and absent, as `migrate` opens the store), a new database's WAL holds only the frames written to it.
    const off = tempDir();
    const store = await open(off);
    try {
      expect(fs.statSync(walOf(off)).size).toBeLessThan(walBytes(FRAMES) / 4);
    } finally {
      await store.close();
    }
    expect(loadConfig({}).sqliteWalPreallocate).toBe(true);
    expect(loadConfig({ SQLITE_WAL_PREALLOCATE: 'false' }).sqliteWalPreallocate).toBe(false);
    expect(() => loadConfig({ SQLITE_WAL_PREALLOCATE: 'sometimes' })).toThrow(/SQLITE_WAL_PREALLOCATE/);
  });

  it('loses no acknowledged commit when the process is killed, and never touches the WAL it left', async () => {
    const dataDir = tempDir();
    // A child writes 150 rows through the store, each acknowledged (synced) before the next, and is killed.
    const script = `
      import { sql } from 'kysely';
      import { createLogger } from './src/logger.ts';
      import { openStore } from './src/store/index.ts';
      const store = await openStore({ dataDir: ${JSON.stringify(dataDir)}, logger: createLogger({ level: 'silent' }),
        sqliteWalPreallocate: true, sqliteWalRestartFrames: ${RESTART_FRAMES} });
      await sql\`create table t (x integer primary key, v text not null)\`.execute(store.db);
      for (let i = 0; i < 150; i++) await sql\`insert into t values (\${i}, \${'w'.repeat(500)})\`.execute(store.db);
      process.stdout.write('acknowledged 150\\n');
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('acknowledged 150')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`the writer exited (${code}) first:\n${out}`)));
    });
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    // The WAL it left holds the commits: it is SQLite's, and written ahead it is not rewritten.
    const wal = walOf(dataDir);
    const before = fs.statSync(wal);
    const header = fs.readFileSync(wal).subarray(0, 32);
    expect(sqliteHeader(wal)).toBe(true);
    // A second name left for it (the crash came after the close began) is removed; the WAL is not touched.
    fs.linkSync(wal, `${wal}.kept`);
    expect(await preallocateWal(SQLite, path.join(dataDir, 'gateway.sqlite'), FRAMES)).toBe(false);
    expect(fs.existsSync(`${wal}.kept`)).toBe(false);
    expect(fs.statSync(wal).ino).toBe(before.ino);
    expect(fs.statSync(wal).mtimeMs).toBe(before.mtimeMs);
    expect(fs.readFileSync(wal).subarray(0, 32)).toEqual(header);

    const store = await open(dataDir, true);
    try {
      expect(await rowsAndIntegrity(store)).toEqual({ rows: 150, integrity: [{ integrity_check: 'ok' }] });
    } finally {
      await store.close();
    }
  }, 60_000);

  it('removes the staging file a stopped process left, and keeps a running one’s', async () => {
    const dataDir = tempDir();
    const file = path.join(dataDir, 'gateway.sqlite');
    // No process has this pid (above Linux's largest): its writer stopped midway. The parent of this test runs.
    const stale = `${file}-wal.4194304999.preallocating`;
    const live = `${file}-wal.${process.ppid}.preallocating`;
    fs.writeFileSync(stale, Buffer.alloc(4_096));
    fs.writeFileSync(live, Buffer.alloc(4_096));
    expect(await preallocateWal(SQLite, file, 8)).toBe(true);
    expect(fs.existsSync(stale)).toBe(false);
    expect(fs.existsSync(live)).toBe(true);
    // Its own staging file is linked in as the WAL, then removed.
    expect(fs.existsSync(`${file}-wal.${process.pid}.preallocating`)).toBe(false);
    expect(fs.statSync(`${file}-wal`).size).toBe(walBytes(8));
    expect(fs.readFileSync(`${file}-wal`).every((b) => b === 0)).toBe(true);
    // The database has its header page, in WAL mode (SQLite deletes the WAL of a database without one).
    const db = new SQLite(file);
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(fs.statSync(`${file}-wal`).size).toBe(walBytes(8));
    } finally {
      db.close();
    }
  });
});
