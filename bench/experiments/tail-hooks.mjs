// Preloaded into a gateway by trickle-creation.ts --tail (`node --import`): a timeline of what can hold a request up,
// written to TAIL_LOG as one JSON array per line, times in ms since the epoch (performance.timeOrigin + now):
// ["sync", start, end] each WAL fdatasync on libuv's pool (the store calls fs.fdatasync);
// ["checkpoint", start, end, frames, asked] each checkpoint of the worker, from the request to its answer (frames: the
// WAL's size after it; asked: when the last request before the answer left, the same as start unless more requests
// were made; a hold is the span from one answer to the next answer after which the WAL restarted: trickle-creation.ts);
// ["commit", start, end] each COMMIT on the main thread that took over 0.5 ms (the first after a WAL restart writes
// the WAL's new header and syncs it there);
// ["copy", start, end, log, checkpointed] each wal_checkpoint run by the checkpoint worker, from its thread (the copy
// and SQLite's two syncs; the answer then waits for the main thread);
// ["clock", hrtime ms, epoch ms] now and then, to set perf's CLOCK_MONOTONIC timestamps (trickle-creation.ts
// --syscalls) on this timeline;
// ["gc", start, end, kind] each GC pause of the main thread; ["loop", start, end] each time the event loop came back
// more than 4 ms after a 5 ms timer was due (it ran something else meanwhile, or was not scheduled); ["heap", t,
// old, young] the old generation's and the young generation's used bytes, every 250 ms (old space, code, large
// objects; new space and new large objects): what the old generation gains between two mark-compacts is what was
// promoted meanwhile.
// Nothing of the gateway is changed: only Node's fs, Worker and timers and better-sqlite3's exec and pragma are
// observed (the gateway and this file resolve the same better-sqlite3).
import fs from 'node:fs';
import { constants, performance, PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';
import { isMainThread, Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';

const file = process.env.TAIL_LOG;
const epoch = () => performance.timeOrigin + performance.now();
if (file && !isMainThread) {
  // The checkpoint worker: each wal_checkpoint's run, written at once (a few a second).
  const pragma = Database.prototype.pragma;
  Database.prototype.pragma = function (source, ...rest) {
    if (!String(source).startsWith('wal_checkpoint')) return pragma.call(this, source, ...rest);
    const start = epoch();
    const result = pragma.call(this, source, ...rest);
    const r = result?.[0] ?? {};
    fs.appendFileSync(file, JSON.stringify(['copy', start, epoch(), r.log ?? null, r.checkpointed ?? null]) + '\n');
    return result;
  };
}
// Worker threads (the checkpoint worker) are started with the same --import: only the main thread is observed.
if (file && isMainThread) {
  const origin = performance.timeOrigin;
  const now = () => origin + performance.now();
  const lines = [];
  const flush = () => {
    if (lines.length) fs.appendFileSync(file, lines.splice(0).join('\n') + '\n');
  };
  setInterval(flush, 1000).unref();
  process.on('exit', flush);
  const record = (entry) => lines.push(JSON.stringify(entry));

  const fdatasync = fs.fdatasync;
  fs.fdatasync = function (fd, callback) {
    const start = now();
    return fdatasync.call(this, fd, (error) => {
      record(['sync', start, now()]);
      callback(error);
    });
  };

  const postMessage = Worker.prototype.postMessage;
  const asked = new WeakMap();
  Worker.prototype.postMessage = function (message, ...rest) {
    if (message === 'checkpoint') {
      const t = now();
      const a = asked.get(this);
      asked.set(this, a ? [a[0], t] : [t, t]);
      if (!this.tailObserved) {
        this.tailObserved = true;
        this.on('message', (m) => {
          const a = asked.get(this);
          asked.delete(this);
          if (a !== undefined) record(['checkpoint', a[0], now(), m?.log ?? null, a[1]]);
        });
      }
    }
    return postMessage.call(this, message, ...rest);
  };

  const exec = Database.prototype.exec;
  Database.prototype.exec = function (source) {
    if (source !== 'commit') return exec.call(this, source);
    const start = now();
    const result = exec.call(this, source);
    const end = now();
    if (end - start > 0.5) record(['commit', start, end]);
    return result;
  };

  const clock = () => record(['clock', Number(process.hrtime.bigint()) / 1e6, now()]);
  clock();
  setInterval(clock, 1000).unref();

  const kinds = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
    [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak',
  };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      record(['gc', origin + e.startTime, origin + e.startTime + e.duration, kinds[e.detail?.kind] ?? 'other']);
  }).observe({ entryTypes: ['gc'] });

  setInterval(() => {
    let old = 0;
    let young = 0;
    for (const space of v8.getHeapSpaceStatistics()) {
      if (space.space_name.startsWith('new')) young += space.space_used_size;
      else if (space.space_name !== 'read_only_space') old += space.space_used_size;
    }
    record(['heap', now(), old, young]);
  }, 250).unref();

  let due = now() + 5;
  setInterval(() => {
    const t = now();
    if (t - due > 4) record(['loop', due, t]);
    due = t + 5;
  }, 5).unref();
}
