/**
 * The `events` table as migrated (a UNIQUE `dedupe_key`, `events_kind_key` on (kind, key, seq), the two expiry
 * indexes) against one unique index on (kind, key, dedupe_key) in place of the first two (docs/decisions/072): the
 * event log's insert with a mobile-ID success's sizes and random auth_req_ids, better-sqlite3 alone on /dev/shm, WAL,
 * synchronous NORMAL, no autocheckpoint, on a table that already holds `--prefill` rows (so that the random keys land
 * on many leaf pages). µs of process CPU per row, commits in groups of `--group`, variants interleaved per round; then
 * the newest event of each inserted key, as a subscription's first read asks it (µs per read).
 *
 *   npx tsx bench/experiments/events-one-index.ts [--group 8] [--rows 20000] [--prefill 100000] [--rounds 8]
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import SQLite from 'better-sqlite3';

import { EVENT_COLUMNS as COLUMNS, sampleEventRow as row } from './sample-event.js';

const { values: cli } = parseArgs({
  options: {
    group: { type: 'string', default: '8' },
    rows: { type: 'string', default: '20000' },
    prefill: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '8' },
  },
});
const G = Number(cli.group);
const N = Math.ceil(Number(cli.rows) / G) * G;
const EXPIRY = `create index events_expires on events (expires_at);
  create index events_secrets_expire on events (secrets_expire_at);`;
const variants = {
  migrated: {
    ddl: `create table events (${COLUMNS.replace('DEDUPE', 'unique')});
      create index events_kind_key on events (kind, key, seq); ${EXPIRY}`,
    conflict: '(dedupe_key)',
  },
  'one index': {
    ddl: `create table events (${COLUMNS.replace('DEDUPE', '')});
      create unique index events_kind_key_dedupe on events (kind, key, dedupe_key); ${EXPIRY}`,
    conflict: '(kind, key, dedupe_key)',
  },
};
type Variant = keyof typeof variants;

function run(variant: Variant): { insert: number; read: number } {
  const dir = fs.mkdtempSync(path.join('/dev/shm', 'events-one-index-'));
  const db = new SQLite(path.join(dir, 'events.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec(variants[variant].ddl);
  const insert = db.prepare(
    `insert into events (kind, key, dedupe_key, fingerprint, payload, meta, scope, received_at, expires_at,
      secrets_expire_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      on conflict ${variants[variant].conflict} do nothing returning seq`,
  );
  db.exec('begin');
  for (let i = 0; i < Number(cli.prefill); i++) insert.get(row());
  db.exec('commit');
  db.pragma('wal_checkpoint(TRUNCATE)');
  const rows = Array.from({ length: N }, row);
  const begin = db.prepare('begin immediate');
  const commit = db.prepare('commit');
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i += G) {
    begin.run();
    for (let j = i; j < i + G; j++) insert.get(rows[j]);
    commit.run();
  }
  const c = process.cpuUsage(c0);
  // What every subscription reads when it starts: the newest event of its key (src/events/log.ts latest).
  const latest = db.prepare('select * from events where kind = ? and key = ? order by seq desc limit 1');
  const r0 = process.cpuUsage();
  for (const r of rows) latest.get(r[0], r[1]);
  const rc = process.cpuUsage(r0);
  db.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { insert: (c.user + c.system) / N, read: (rc.user + rc.system) / N };
}

const perRow: Record<Variant, number[]> = { migrated: [], 'one index': [] };
const perRead: Record<Variant, number[]> = { migrated: [], 'one index': [] };
for (let r = 0; r < Number(cli.rounds); r++) {
  const order: Variant[] = r % 2 ? ['one index', 'migrated'] : ['migrated', 'one index'];
  for (const v of order) {
    const { insert, read } = run(v);
    perRow[v].push(insert);
    perRead[v].push(read);
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const ratios = perRow['one index'].map((o, i) => o / perRow.migrated[i]!).sort((a, b) => a - b);
console.log(
  `group ${G}: migrated ${median(perRow.migrated).toFixed(1)} µs, one index ${median(perRow['one index']).toFixed(1)} µs ` +
    `of CPU per row; ratio median ${median(ratios).toFixed(3)}, range ${ratios[0]!.toFixed(3)}..${ratios.at(-1)!.toFixed(3)}; ` +
    `newest event of a key: migrated ${median(perRead.migrated).toFixed(2)} µs, one index ${median(perRead['one index']).toFixed(2)} µs`,
);
