/**
 * Loaded (`node --import`) into both gateways of claim-sync-ab.ts: counts the WAL syncs (`fs.fdatasync`) and the
 * COMMITs (`Database#exec('commit')`) of the process, and writes the two counts to CLAIM_SYNC_COUNTS every 50 ms.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';

const file = process.env.CLAIM_SYNC_COUNTS;
if (file) {
  const counts = { syncs: 0, commits: 0 };
  const fdatasync = fs.fdatasync;
  fs.fdatasync = ((...args: Parameters<typeof fs.fdatasync>) => {
    counts.syncs += 1;
    return fdatasync(...args);
  }) as typeof fs.fdatasync;
  // better-sqlite3 is CommonJS: the gateway's import of it gets this very prototype.
  const Database = createRequire(import.meta.url)('better-sqlite3') as { prototype: { exec(sql: string): unknown } };
  const exec = Database.prototype.exec;
  Database.prototype.exec = function countedExec(this: unknown, sql: string) {
    if (sql === 'commit') counts.commits += 1;
    return exec.call(this, sql);
  };
  // Written aside and renamed: the reader never sees half a file.
  setInterval(() => {
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(counts));
    fs.renameSync(`${file}.tmp`, file);
  }, 50).unref();
}
