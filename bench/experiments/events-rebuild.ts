/**
 * How long SQLite takes to copy the `events` table into one without the inline UNIQUE on `dedupe_key` (the only way
 * SQLite drops that constraint) and to build a unique index on (kind, key, dedupe_key) in place of it and of
 * `events_kind_key`: better-sqlite3 alone, a file under `--dir` (default the OS temp directory, on disk), WAL,
 * synchronous NORMAL, `--rows` rows with a mobile-ID success's sizes and random auth_req_ids. Wall time and process
 * CPU of the copy in one transaction, as a start-up migration would run it.
 *
 *   npx tsx bench/experiments/events-rebuild.ts [--rows 1000000] [--dir /tmp]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import SQLite from 'better-sqlite3';

import { EVENT_COLUMNS as COLUMNS, sampleEventRow } from './sample-event.js';

const { values: cli } = parseArgs({
  options: { rows: { type: 'string', default: '1000000' }, dir: { type: 'string', default: os.tmpdir() } },
});
const dir = fs.mkdtempSync(path.join(cli.dir, 'events-rebuild-'));
const db = new SQLite(path.join(dir, 'events.sqlite'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.exec(`create table events (${COLUMNS.replace('DEDUPE', 'unique')});
  create index events_kind_key on events (kind, key, seq);
  create index events_expires on events (expires_at);
  create index events_secrets_expire on events (secrets_expire_at);`);
const insert = db.prepare(`insert into events (kind, key, dedupe_key, fingerprint, payload, meta, scope, received_at,
  expires_at, secrets_expire_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
const fill = db.transaction((n: number) => {
  for (let i = 0; i < n; i++) insert.run(sampleEventRow());
});
const rows = Number(cli.rows);
for (let done = 0; done < rows; done += 100_000) fill(Math.min(100_000, rows - done));
db.pragma('wal_checkpoint(TRUNCATE)');
const before = fs.statSync(path.join(dir, 'events.sqlite')).size;

const t0 = process.hrtime.bigint();
const c0 = process.cpuUsage();
db.exec(`begin immediate;
  create table events_new (${COLUMNS.replace('DEDUPE', '')});
  insert into events_new select seq, kind, key, dedupe_key, fingerprint, payload, meta, scope, received_at, expires_at,
    secrets_expire_at from events order by seq;
  drop table events;
  alter table events_new rename to events;
  create unique index events_kind_key_dedupe on events (kind, key, dedupe_key);
  create index events_expires on events (expires_at);
  create index events_secrets_expire on events (secrets_expire_at);
  commit;`);
db.pragma('wal_checkpoint(TRUNCATE)');
const c = process.cpuUsage(c0);
const wall = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(
  `${rows} rows, ${(before / 1e6).toFixed(0)} MB: rebuild ${wall.toFixed(2)} s wall, ` +
    `${((c.user + c.system) / 1e6).toFixed(2)} s CPU (in ${dir.startsWith('/dev/shm') ? 'tmpfs' : 'a file on disk'})`,
);
db.close();
fs.rmSync(dir, { recursive: true, force: true });
