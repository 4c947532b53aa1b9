import fs from 'node:fs';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';

/** A WAL frame's header; each frame is that and one page (docs/decisions/141). */
export const FRAME_HEADER_BYTES = 24;
export const WAL_HEADER_BYTES = 32;
const CHUNK_BYTES = 1 << 20;

/**
 * The WAL as SQLite would leave it after a restart at its full size, written before SQLite opens the database
 * (docs/decisions/141): `frames` frames of zeros behind a header of zeros, synced. A WAL whose header is not valid
 * holds no frame for SQLite, which writes its own header at the first commit and its frames over the zeros: the
 * file's blocks then exist, and a commit's WAL sync writes over them instead of allocating them (on ext4 a growing WAL
 * halved the first 10 s of creations after each start, its syncs allocating blocks and journalling the size). SQLite
 * never trusts what lies past its last valid frame, as after any restart of the WAL.
 *
 * Only where no WAL exists: one that exists is in use or holds frames to recover, and is SQLite's alone. The zeros are
 * written to a file of their own and linked in as the WAL in one step, which fails if a WAL appeared meanwhile (another
 * process opened the database): no byte is written to a WAL SQLite may use. SQLite deletes the WAL of a database with
 * no page when it opens it, so a new database is first given its header page, in WAL mode. After a clean stop the
 * WAL kept by `keepWal` is linked in instead of a new one (`reuse`). Returns whether it made a WAL.
 */
export async function preallocateWal(SQLite: typeof BetterSqlite3, file: string, frames: number): Promise<boolean> {
  const wal = `${file}-wal`;
  const kept = `${wal}.kept`;
  if (fs.existsSync(wal)) {
    // A crash after `keepWal` took its link: the WAL is SQLite's, and the link only a second name for it.
    fs.rmSync(kept, { force: true });
    return false;
  }
  if (!fs.existsSync(file) || fs.statSync(file).size === 0) {
    const db = new SQLite(file);
    try {
      db.pragma('journal_mode = WAL');
    } finally {
      db.close();
    }
    // Closing deletes the WAL it made, unless another connection still has the database open.
    if (fs.existsSync(wal)) return false;
  }
  const bytes = WAL_HEADER_BYTES + frames * (FRAME_HEADER_BYTES + pageSize(file));
  if (fs.existsSync(kept)) return reuse(kept, wal, bytes);
  removeStale(wal);
  // Through libuv's pool: seconds of writes during which the event loop stays free (a SIGTERM is handled).
  const staging = `${wal}.${process.pid}.preallocating`;
  return linkIn(staging, wal, () => zeros(staging, 'w', bytes));
}

/**
 * Links `source` in as the WAL once `prepare` has written it, unless a WAL appeared meanwhile (another process opened
 * the database); `source`'s own name is removed either way.
 */
async function linkIn(source: string, wal: string, prepare: () => Promise<void>): Promise<boolean> {
  try {
    await prepare();
    await fs.promises.link(source, wal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await fs.promises.rm(source, { force: true });
  }
}

/** Zeroes the header of `target`, writes zeros from its end up to `bytes`, and syncs it. */
async function zeros(target: string, flags: 'w' | 'r+', bytes: number): Promise<void> {
  const handle = await fs.promises.open(target, flags);
  try {
    const chunk = Buffer.alloc(CHUNK_BYTES);
    await handle.write(chunk, 0, WAL_HEADER_BYTES, 0);
    for (let at = (await handle.stat()).size; at < bytes; at += CHUNK_BYTES)
      await handle.write(chunk, 0, Math.min(CHUNK_BYTES, bytes - at), at);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

/**
 * The WAL of the last clean stop (`keepWal`), whose name SQLite deleted once every frame was copied into the database
 * and the database synced: its header is zeroed (again: a crash may have come before `keptWal` did it), it is grown to
 * `bytes` if it is smaller, and linked in as the WAL, as a staging file is. Only its header and what it lacks are
 * written: a start after a clean stop writes 32 bytes instead of ~300 MB.
 */
function reuse(kept: string, wal: string, bytes: number): Promise<boolean> {
  return linkIn(kept, wal, () => zeros(kept, 'r+', bytes));
}

/**
 * Before the store closes SQLite: a second name (`gateway.sqlite-wal.kept`) for the WAL, so that its blocks outlive the
 * close, at which SQLite deletes the WAL once every frame is copied. `keptWal` after the close settles what it is.
 */
export function keepWal(file: string): void {
  const wal = `${file}-wal`;
  fs.rmSync(`${wal}.kept`, { force: true });
  try {
    fs.linkSync(wal, `${wal}.kept`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/**
 * After the close: where SQLite deleted the WAL (it did so only after copying every frame and syncing the database),
 * the kept file's header is zeroed and synced, so that the next start finds an empty WAL of its full size to link
 * in; where the WAL still exists (another connection has it, or the close's checkpoint did not finish), the second
 * name is removed and nothing is written.
 */
export async function keptWal(file: string): Promise<void> {
  const wal = `${file}-wal`;
  const kept = `${wal}.kept`;
  if (!fs.existsSync(kept)) return;
  if (fs.existsSync(wal)) {
    fs.rmSync(kept, { force: true });
    return;
  }
  await zeros(kept, 'r+', 0);
}

/** The database's page size, from its header (bytes 16-17, big-endian; 1 stands for 65,536). */
function pageSize(file: string): number {
  const header = Buffer.alloc(18);
  const fd = fs.openSync(file, 'r');
  try {
    fs.readSync(fd, header, 0, 18, 0);
  } finally {
    fs.closeSync(fd);
  }
  const size = header.readUInt16BE(16);
  return size === 1 ? 65_536 : size >= 512 ? size : 4_096;
}

/** Staging files that a process which no longer runs left behind (it stopped while writing the zeros). */
function removeStale(wal: string): void {
  const prefix = `${path.basename(wal)}.`;
  for (const name of fs.readdirSync(path.dirname(wal))) {
    if (!name.startsWith(prefix) || !name.endsWith('.preallocating')) continue;
    const pid = Number(name.slice(prefix.length, -'.preallocating'.length));
    if (Number.isSafeInteger(pid) && pid > 0 && !running(pid))
      fs.rmSync(path.join(path.dirname(wal), name), { force: true });
  }
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
