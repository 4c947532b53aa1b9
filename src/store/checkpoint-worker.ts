// The worker thread of WalCheckpointer (sqlite-dialect.ts, docs/decisions/033): its own connection to the database
// file copies the WAL into it (PASSIVE: it never blocks the writer), so that the copy and its syncs stay off the event
// loop; at a lower priority, so that they take the core when the event loop does not want it (docs/decisions/139).
// It answers each 'checkpoint' with the WAL's size in frames, and closes on 'close'.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

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
  error?: string;
}

const port = parentPort;
if (port) {
  const { file, syncDatabase, nice } = workerData as CheckpointWorkerData;
  lowerPriority(nice);
  const db = new Database(file, { fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  let fd: number | null = null;
  /** The WAL's frames copied into the database file as of the last checkpoint (SQLite's running count). */
  let copied = 0;
  port.on('message', (message: CheckpointRequest) => {
    if (message === 'close') {
      db.close();
      if (fd !== null) fs.closeSync(fd);
      port.close();
      return;
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
      reply = { log, checkpointed, synced };
    } catch (error) {
      reply = { log: 0, checkpointed: 0, synced: false, error: error instanceof Error ? error.message : String(error) };
    }
    port.postMessage(reply);
  });
}
