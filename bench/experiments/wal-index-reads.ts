/**
 * What a read costs through a WAL of 16,384 frames against one of 65,536 (docs/decisions/107), SQLite alone: two
 * database files, each a table of 20,000 rows (~200 bytes), written in transactions of 40 random updates until its WAL
 * holds the size; every frame then copied (PASSIVE) while a read transaction pins the WAL, so that the writes after it
 * (--tail frames, 2,000 by default) append instead of restarting it. A reader's point SELECTs by rowid (--reads, in
 * rounds, the two files in turns): this process's CPU per SELECT, first with the tail, then with the tail copied too.
 * SQLite looks a page up only in the frames past the last checkpoint; this measures whether the frames before them
 * (and their wal-index) cost anything.
 *
 *   npx tsx bench/experiments/wal-index-reads.ts [--rounds 8] [--reads 200000] [--tail 2000]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';

const { values: cli } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    reads: { type: 'string', default: '200000' },
    tail: { type: 'string', default: '2000' },
  },
});
const ROWS = 20_000;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-index-reads-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

/** The WAL's frames, from its file's size (nothing restarts it here, so the file is as long as the WAL). */
const frames = (file: string) => Math.round((fs.statSync(`${file}-wal`).size - 32) / (4096 + 24));

function build(size: number) {
  const file = path.join(dir, `${size}.sqlite`);
  const writer = new Database(file);
  writer.pragma('journal_mode = WAL');
  writer.pragma('synchronous = OFF');
  writer.pragma('wal_autocheckpoint = 0');
  writer.exec('create table t (id integer primary key, v blob not null)');
  const insert = writer.prepare('insert into t (id, v) values (?, randomblob(200))');
  writer.transaction(() => {
    for (let i = 1; i <= ROWS; i++) insert.run(i);
  })();
  const update = writer.prepare('update t set v = randomblob(200) where id = ?');
  const batch = writer.transaction(() => {
    for (let i = 0; i < 40; i++) update.run(1 + Math.floor(Math.random() * ROWS));
  });
  const checkpointer = new Database(file);
  while (frames(file) < size) for (let i = 0; i < 50; i++) batch();
  const pin = new Database(file);
  pin.exec('begin');
  pin.prepare('select count(*) from t').get();
  checkpointer.pragma('wal_checkpoint(PASSIVE)');
  const start = frames(file);
  while (frames(file) < start + Number(cli.tail)) batch();
  pin.exec('commit');
  pin.close();
  const reader = new Database(file, { readonly: true });
  const select = reader.prepare('select v from t where id = ?');
  return { size, writer, checkpointer, reader, select, log: frames(file) };
}

const sides = [build(16_384), build(65_536)];
for (const s of sides) console.log(`${s.size}: the WAL holds ${s.log} frames`);

function measure(s: (typeof sides)[number]): number {
  const n = Number(cli.reads);
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) s.select.get(1 + ((i * 7919) % ROWS));
  const used = process.cpuUsage(before);
  return ((used.user + used.system) / n) * 1e3;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const phase of ['with the tail', 'every frame copied']) {
  if (phase === 'every frame copied')
    for (const s of sides) {
      // A checkpoint while every read is done copies the tail too; no write follows, so nothing restarts the WAL.
      const r = s.checkpointer.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number; checkpointed: number }>;
      console.log(`${s.size}: ${r[0]!.checkpointed} of ${r[0]!.log} frames copied`);
    }
  for (const s of sides) measure(s); // warm-up
  const ns: Record<number, number[]> = { 16384: [], 65536: [] };
  for (let r = 0; r < Number(cli.rounds); r++) {
    const order = r % 2 ? [...sides].reverse() : sides;
    for (const s of order) ns[s.size]!.push(measure(s));
  }
  const d = ns[65536]!.map((x, i) => x - ns[16384]![i]!);
  console.log(
    `${phase}: ns of CPU per SELECT, median (range): 16,384 ${median(ns[16384]!).toFixed(0)} (${Math.min(...ns[16384]!).toFixed(0)}–${Math.max(...ns[16384]!).toFixed(0)}), 65,536 ${median(ns[65536]!).toFixed(0)} (${Math.min(...ns[65536]!).toFixed(0)}–${Math.max(...ns[65536]!).toFixed(0)}); 65,536 − 16,384 by round: median ${median(d).toFixed(0)}, range ${Math.min(...d).toFixed(0)}–${Math.max(...d).toFixed(0)}; load ${os.loadavg()[0]!.toFixed(2)}`,
  );
}
for (const s of sides) {
  s.reader.close();
  s.checkpointer.close();
  s.writer.close();
}
