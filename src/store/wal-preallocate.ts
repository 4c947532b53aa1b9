import fs from 'node:fs';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';

/** A WAL frame's header; each frame is that and one page (docs/decisions/141). */
const FRAME_HEADER_BYTES = 24;
const WAL_HEADER_BYTES = 32;
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
 * no page when it opens it, so a new database is first given its header page, in WAL mode. Returns whether it wrote
 * the WAL.
 */
export async function preallocateWal(SQLite: typeof BetterSqlite3, file: string, frames: number): Promise<boolean> {
  const wal = `${file}-wal`;
  if (fs.existsSync(wal)) return false;
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
  removeStale(wal);
  // Through libuv's pool: seconds of writes during which the event loop stays free (a SIGTERM is handled).
  const staging = `${wal}.${process.pid}.preallocating`;
  try {
    const handle = await fs.promises.open(staging, 'w');
    try {
      const zeros = Buffer.alloc(CHUNK_BYTES);
      for (let at = 0; at < bytes; at += CHUNK_BYTES)
        await handle.write(zeros, 0, Math.min(CHUNK_BYTES, bytes - at), at);
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await fs.promises.link(staging, wal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await fs.promises.rm(staging, { force: true });
  }
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
