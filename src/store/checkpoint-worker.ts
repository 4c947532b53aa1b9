// The worker thread of WalCheckpointer (sqlite-dialect.ts, docs/decisions/033): its own connection to the database
// file copies the WAL into it (PASSIVE: it never blocks the writer), so that the copy and its syncs stay off the event
// loop; at a lower priority, so that they take the core when the event loop does not want it (docs/decisions/139).
// Before each copy it reads the WAL's idle parts ahead of the writer into the kernel's cache (docs/decisions/145). It
// answers each 'checkpoint' with the WAL's size in frames, and closes on 'close'.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

import { WalReadAhead } from './wal-read-ahead.js';

/** What the dialect hands the worker: the database file (which must exist), and whether to sync it after a copy. */
export interface CheckpointWorkerData {
  file: string;
  /**
   * SQLITE_CHECKPOINT_SYNC: fdatasync the database file after each checkpoint that copied pages (SQLite syncs it only
   * after a copy that reached the WAL's end, under load only in the restart's hold), so that the pages copied never pile
   * up unsynced until that hold, which would then wait for all of them (docs/decisions/136).
   */
  syncDatabase: boolean;
  /**
   * SQLITE_CHECKPOINT_NICE: how many nice steps below the thread that started it this thread runs, so that a copy
   * yields the core to the event loop when both want it (docs/decisions/139). 0: the same priority.
   */
  nice: number;
  /**
   * SQLITE_WAL_READ_AHEAD_MB in bytes: how far ahead of the writer the WAL's idle parts are read into the kernel's
   * cache as each checkpoint begins (wal-read-ahead.ts, docs/decisions/145); 0: not read.
   */
  readAheadBytes: number;
  /** SQLITE_WAL_RESTART_FRAMES: from this many frames the restart's hold comes, and the WAL's start is written next. */
  restartFrames: number;
  /** How long a part of the WAL lies unused before it is read ahead (wal-read-ahead.ts's WAL_IDLE_MS; 0 in tests). */
  readAheadIdleMs?: number;
}

/**
 * Lowers this thread's priority by `steps` nice values, up to 19. On Linux a thread is a task with a nice value of its
 * own, set through its id (from /proc/thread-self), and a new thread starts with its creator's. Lowering needs no
 * privilege; where there is no /proc/thread-self (another system) or the system refuses, the thread keeps its priority:
 * a checkpoint at the event loop's priority is the behaviour before decision 139, not a fault.
 */
function lowerPriority(steps: number): void {
  if (steps <= 0) return;
  try {
    const tid = Number(path.basename(fs.readlinkSync('/proc/thread-self')));
    os.setPriority(tid, Math.min(19, os.getPriority(tid) + steps));
  } catch {
    // not Linux, /proc not mounted, or refused: the priority stays
  }
}

/** The dialect's messages: run one checkpoint, or close the connection and end the thread. */
export type CheckpointRequest = 'checkpoint' | 'close';

/**
 * The answer to a checkpoint: the WAL's size in frames after it, how many of them are copied, and whether this worker
 * synced the database file after it (0, 0, false and the error's message when it failed).
 */
export interface CheckpointReply {
  log: number;
  /** The WAL's frames copied into the database file since the WAL last restarted (SQLite's count). */
  checkpointed: number;
  synced: boolean;
  /** The bytes of the WAL read ahead of the writer so far, this checkpoint's reading included. */
  readAhead: number;
  error?: string;
}

const port = parentPort;
if (port) {
  const { file, syncDatabase, nice, readAheadBytes, restartFrames, readAheadIdleMs } =
    workerData as CheckpointWorkerData;
  lowerPriority(nice);
  const db = new Database(file, { fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  const ahead = new WalReadAhead(
    `${file}-wal`,
    db.pragma('page_size', { simple: true }) as number,
    readAheadBytes,
    restartFrames,
    readAheadIdleMs,
  );
  let readAhead = 0;
  /** What the last checkpoint left: the WAL's size in frames and how many are copied (null before the first). */
  let last: { log: number; checkpointed: number } | null = null;
  let fd: number | null = null;
  /** The WAL's frames copied into the database file as of the last checkpoint (SQLite's running count). */
  let copied = 0;
  port.on('message', (message: CheckpointRequest) => {
    if (message === 'close') {
      db.close();
      if (fd !== null) fs.closeSync(fd);
      ahead.close();
      port.close();
      return;
    }
    // First the WAL's idle parts ahead of where the writer went since the last checkpoint: after an idle spell that is
    // at once, before this copy takes its time. Not in the restart's hold (`after` knows it from the last size), whose
    // answer the writer waits for. A WAL that cannot be read here is written as before: the read only helps.
    if (last !== null) {
      try {
        readAhead += ahead.after(last.log, last.checkpointed);
      } catch {
        // unreadable here: the writer writes as it would without the reading
      }
    }
    let reply: CheckpointReply;
    try {
      const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number; checkpointed: number }>;
      const log = r?.log ?? 0;
      const checkpointed = r?.checkpointed ?? 0;
      // Pages were copied (the count moved; it starts again from 0 when the WAL restarts). SQLite syncs the file itself
      // only when the copy reached the WAL's end as it stands after the copy, which under load is only in the restart's
      // hold; after a copy it did sync, this one finds nothing to write. A failed sync is this checkpoint's error: the
      // WAL still holds every page copied, and SQLite's own sync before any restart reports the failure again (fsync's
      // error reaches every descriptor of the file open at the time), so the WAL is never restarted over lost pages.
      const synced = syncDatabase && checkpointed !== copied;
      copied = checkpointed;
      if (synced) fs.fdatasyncSync((fd ??= fs.openSync(file, 'r')));
      reply = { log, checkpointed, synced, readAhead };
      last = { log, checkpointed };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      reply = { log: 0, checkpointed: 0, synced: false, readAhead, error: message };
    }
    port.postMessage(reply);
  });
}
