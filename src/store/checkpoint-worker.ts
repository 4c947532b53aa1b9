// The worker thread of WalCheckpointer (sqlite-dialect.ts, docs/decisions/033): its own connection to the database
// file copies the WAL into it (PASSIVE: it never blocks the writer), so that the copy and its two fsyncs stay off the
// event loop. It answers each 'checkpoint' with the WAL's size in frames, and closes on 'close'.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** What the dialect hands the worker: the database file (which must exist). */
export interface CheckpointWorkerData {
  file: string;
}

/** The dialect's messages: run one checkpoint, or close the connection and end the thread. */
export type CheckpointRequest = 'checkpoint' | 'close';

/** The answer to a checkpoint: the WAL's size in frames after it (0 and the error's message when it failed). */
export interface CheckpointReply {
  log: number;
  error?: string;
}

const port = parentPort;
if (port) {
  const db = new Database((workerData as CheckpointWorkerData).file, { fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  port.on('message', (message: CheckpointRequest) => {
    if (message === 'close') {
      db.close();
      port.close();
      return;
    }
    let reply: CheckpointReply;
    try {
      const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
      reply = { log: r?.log ?? 0 };
    } catch (error) {
      reply = { log: 0, error: error instanceof Error ? error.message : String(error) };
    }
    port.postMessage(reply);
  });
}
