import fs from 'node:fs';

import { FRAME_HEADER_BYTES, WAL_HEADER_BYTES } from './wal-preallocate.js';

/** The span read at once, and the unit whose last use is kept. */
const CHUNK_BYTES = 1 << 20;
/**
 * How long a part of the WAL may lie unused before it is read again ahead of the writer. A host that reclaims idle
 * file pages does so after a longer idle spell (the bench machine's DAMON: 60 s unused); a part the writer passes
 * more often than this is still in the cache, and is left alone.
 */
export const WAL_IDLE_MS = 30_000;

/**
 * The checkpoint worker's reading of the WAL ahead of its writer (SQLITE_WAL_READ_AHEAD_MB, docs/decisions/145).
 *
 * SQLite writes a WAL frame as its 24-byte header and its page, so no write covers a whole page of the kernel's file
 * cache. A write to a page the cache no longer holds first reads that page from the disk (ext4 reads the block before
 * the write lands in it), one synchronous read at a time, inside the event loop's COMMIT. The WAL is rewritten from
 * its start after every restart, over blocks the writer last passed a whole pass before, and written ahead at its full
 * size at the first start (decision 141): where the writer passes a part of it seldom, or after the gateway idled,
 * the kernel may have dropped those pages (a host reclaiming idle memory, a container at its memory limit), and the
 * COMMITs then waited for reads from the disk. Read here first, in large sequential reads off the event loop, the pages
 * are in the cache again when the writer comes.
 *
 * As each checkpoint begins (`after` the last one): the parts the writer filled up to the last one count as used now,
 * and the parts of the `bytes` after where the writer goes next that lay unused for `idleMs` (WAL_IDLE_MS) are read.
 * Where the writer passes often (under load a pass of the WAL takes seconds), nothing is read, so the cost is a copy of
 * what had lain idle.
 */
export class WalReadAhead {
  /** When each 1 MiB part of the WAL was last written by the writer or read here (ms, `now`'s clock). */
  private readonly used: number[] = [];
  /** Where the WAL's frames ended at the last checkpoint. */
  private end = WAL_HEADER_BYTES;
  private fd: number | null = null;
  private buffer: Buffer | null = null;
  private readonly frameBytes: number;
  /** When the worker started: what the WAL held then was just written (the WAL written ahead) or read (recovery). */
  private readonly since: number;

  constructor(
    private readonly wal: string,
    /** The database's page size: a frame is FRAME_HEADER_BYTES and one page. */
    pageSize: number,
    /** How far ahead of the writer to keep the WAL read; 0 reads nothing. */
    private readonly bytes: number,
    /** From how many frames the WAL is restarted from its beginning (SQLITE_WAL_RESTART_FRAMES). */
    private readonly restartFrames: number,
    /** How long a part may lie unused before it is read ahead (WAL_IDLE_MS; tests make it 0). */
    private readonly idleMs = WAL_IDLE_MS,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.frameBytes = FRAME_HEADER_BYTES + pageSize;
    this.since = now();
  }

  /**
   * After a checkpoint that left the WAL at `log` frames, `checkpointed` of them copied into the database: reads the
   * parts ahead of the writer that lay idle, and returns how many bytes it read.
   */
  after(log: number, checkpointed: number): number {
    if (this.bytes <= 0) return 0;
    const now = this.now();
    const end = WAL_HEADER_BYTES + log * this.frameBytes;
    // The writer filled the parts between the last checkpoint's end and this one's, or from the start after a restart.
    this.mark(end >= this.end ? this.end : WAL_HEADER_BYTES, end, now);
    this.end = end;
    // The restart's hold comes next (sqlite-dialect.ts): the pass's last parts will not be written.
    if (log >= this.restartFrames) return 0;
    // Every frame copied: the next write transaction restarts the WAL from its beginning.
    const next = log > 0 && checkpointed >= log ? WAL_HEADER_BYTES : end;
    let read = 0;
    for (let part = Math.floor(next / CHUNK_BYTES); part * CHUNK_BYTES < next + this.bytes; part += 1) {
      if (now - (this.used[part] ?? this.since) < this.idleMs) continue;
      const n = this.read(part * CHUNK_BYTES);
      if (n === 0) break;
      this.used[part] = now;
      read += n;
    }
    return read;
  }

  close(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }

  private mark(from: number, to: number, now: number): void {
    if (to <= from) return;
    for (let part = Math.floor(from / CHUNK_BYTES); part * CHUNK_BYTES < to; part += 1) this.used[part] = now;
  }

  /** One part read into the cache (the bytes themselves are dropped): its length, 0 past the file's end. */
  private read(at: number): number {
    this.fd ??= fs.openSync(this.wal, 'r');
    this.buffer ??= Buffer.allocUnsafe(CHUNK_BYTES);
    return fs.readSync(this.fd, this.buffer, 0, CHUNK_BYTES, at);
  }
}
