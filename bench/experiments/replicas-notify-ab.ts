/**
 * What each replica asks of PostgreSQL per notification, and the CPU it takes, with the NOTIFYs grouped
 * (EVENT_NOTIFY_GROUPED=true) and one per event (false), rounds interleaved in one process (docs/decisions/083);
 * with `probe` as the fourth argument, A's order probes grouped (EVENT_ORDER_PROBE_GROUPED=true) against one per
 * event (false), the NOTIFYs grouped in both (docs/decisions/086); with `named`, every replica's statements named
 * (STORE_PG_NAMED_STATEMENTS=true: parsed and planned once per connection) against unnamed (docs/decisions/104).
 * Per round also PostgreSQL's CPU by process (A's backends, the other backends, walwriter, checkpointer, …), and per
 * event the transactions committed and the WAL records, writes and syncs (pg_stat_database, pg_stat_wal).
 * An embedded server, three buses (A, B, C) each with its own store and pool; A appends mobile-ID events through the
 * `EventLog` at a paced rate and publishes each (what the intake does after the commit), B and C have one subscriber
 * each to every event. Per round: round trips to PostgreSQL (every `pg.Client.query`, by statement), B's and C's reads of the log, CPU of this process and of every PostgreSQL process (/proc),
 * each divided by the events appended, and the delay from append to the last delivery on B and C.
 *
 *   npx tsx bench/experiments/replicas-notify-ab.ts [rate=1000] [seconds=4] [rounds=4] [notify|probe|named]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

import { startEmbeddedPostgres } from '../../scripts/embedded-postgres.js';
import { CursorCodec } from '../../src/events/cursor.js';
import { EventLog } from '../../src/events/log.js';
import { PostgresBus } from '../../src/events/postgres-bus.js';
import { createLogger } from '../../src/logger.js';
import { openStore } from '../../src/store/index.js';
import { sampleAppend } from './sample-event.js';

const rate = Number(process.argv[2] ?? 1000);
const seconds = Number(process.argv[3] ?? 4);
const rounds = Number(process.argv[4] ?? 4);
/** Which switch the rounds alternate: one of A's, or (`named`) the named statements of every replica's pool. */
const toggled =
  process.argv[5] === 'probe' ? 'groupProbes' : process.argv[5] === 'named' ? 'namedStatements' : 'groupNotices';
/** `named` rounds with false send every statement unnamed, as `pg` does without STORE_PG_NAMED_STATEMENTS. */
let unnamed = false;

let queries = 0;
/** Round trips by statement (its first words). */
const statements = new Map<string, number>();
/** Named (prepared once per connection, then only bound and executed) among them. */
let named = 0;
/** The backend of every connection that sent an insert into the log (A's pool), by its process id. */
const inserters = new Set<number>();
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  queries++;
  const config = args[0] as { text?: string; name?: string; values?: unknown[] } | null;
  const text = String(config?.text ?? args[0]);
  const name = text.replace(/^(select \S+|\S+ \S+ \S+).*$/s, '$1');
  statements.set(name, (statements.get(name) ?? 0) + 1);
  if (text.startsWith('insert into "events"')) inserters.add((this as unknown as { processID: number }).processID);
  if (config?.name !== undefined) {
    if (unnamed) args = [config.text, config.values, ...args.slice(1)];
    else named++;
  }
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof query;

const ticks = Number(fs.readFileSync('/proc/self/stat', 'utf8') && 100);
/**
 * CPU seconds of the PostgreSQL server listening on `port` and of every process it started: in all, and by kind (A's
 * backends, the other backends, and each auxiliary process by its title: walwriter, checkpointer, …).
 */
function postgresCpu(port: number): { total: number; by: Map<string, number> } {
  const procs = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  const stat = new Map<string, { ppid: string; cpu: number; sys: number }>();
  let root: string | null = null;
  for (const p of procs) {
    try {
      const s = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      stat.set(p, { ppid: f[1]!, cpu: (Number(f[11]) + Number(f[12])) / ticks, sys: Number(f[12]) / ticks });
      if (root === null && fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').includes(String(port)))
        root = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('postgres') ? p : null;
    } catch {
      // gone
    }
  }
  let total = 0;
  const by = new Map<string, number>();
  for (const [p, s] of stat) {
    if (p !== root && s.ppid !== root) continue;
    total += s.cpu;
    let kind = 'postmaster';
    if (p !== root) {
      let title = '';
      try {
        title = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      } catch {
        // gone
      }
      kind = inserters.has(Number(p))
        ? 'A backends'
        : /\d+\.\d+\.\d+\.\d+\(\d+\)/.test(title)
          ? 'B, C and LISTEN backends'
          : title.replace(/^postgres: /, '');
    }
    by.set(kind, (by.get(kind) ?? 0) + s.cpu);
    by.set(`${kind} (kernel)`, (by.get(`${kind} (kernel)`) ?? 0) + s.sys);
  }
  return { total, by };
}

/** Transactions committed, WAL records, writes and syncs (pg_stat_database, pg_stat_wal), read outside the count. */
async function serverCounters(client: pg.Client): Promise<Record<string, number>> {
  const run = (text: string) =>
    (query as (t: string) => Promise<pg.QueryResult>)
      .call(client, text)
      .then((r) => r.rows[0] as Record<string, string>);
  const db = await run(`select xact_commit from pg_stat_database where datname = current_database()`);
  const wal = await run(`select wal_records, wal_write, wal_sync from pg_stat_wal`);
  return Object.fromEntries(Object.entries({ ...db, ...wal }).map(([k, v]) => [k, Number(v)]));
}

const server = await startEmbeddedPostgres();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'replicas-notify-'));
try {
  const logger = createLogger({ level: 'silent' });
  const url = await server.createDatabase('replicas_notify');
  const counters = new pg.Client({ connectionString: url });
  await counters.connect();
  const cursors = CursorCodec.random();
  const replica = async (name: string) => {
    const store = await openStore({ dataDir: path.join(dir, name), databaseUrl: url, logger });
    const log = new EventLog(store.db, 86_400_000, store.dialect, store.execute);
    let reads = 0;
    const after = log.after.bind(log);
    log.after = (...a) => (reads++, after(...a));
    const inStretches = log.inStretches.bind(log);
    log.inStretches = (...a) => (reads++, inStretches(...a));
    let probes = 0;
    const lowestIn = log.lowestIn.bind(log);
    log.lowestIn = (...a) => (a[0].length > 0 && probes++, lowestIn(...a));
    const bus = await PostgresBus.start({
      databaseUrl: url,
      db: store.db,
      log,
      logger,
      cursors,
      groupNotices: true,
      groupProbes: true,
    });
    return { store, log, bus, reads: () => reads, probes: () => probes };
  };
  const a = await replica('a');
  const b = await replica('b');
  const c = await replica('c');
  const appendedAt = new Map<string, number>();
  let delivered = 0;
  let lastDelay = 0;
  for (const r of [b, c])
    r.bus.subscribe('mobile-id', null, (e) => {
      delivered++;
      lastDelay = Math.max(lastDelay, performance.now() - appendedAt.get(e.key)!);
    });
  const round = async (grouped: boolean) => {
    if (toggled === 'namedStatements') unnamed = !grouped;
    else (a.bus as unknown as { options: Record<typeof toggled, boolean> }).options[toggled] = grouped;
    const n = rate * seconds;
    delivered = 0;
    lastDelay = 0;
    const q0 = queries;
    statements.clear();
    const r0 = b.reads() + c.reads();
    const aReads0 = a.reads();
    const p0 = a.probes();
    const named0 = named;
    const server0 = await serverCounters(counters);
    const cpu0 = process.cpuUsage();
    const pg0 = postgresCpu(server.port);
    const start = performance.now();
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < n; i++) {
      const due = start + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      pending.push(
        (async () => {
          const sample = sampleAppend();
          appendedAt.set(sample.key, performance.now());
          const { event } = await a.log.append(sample);
          await a.bus.publish(event);
        })(),
      );
    }
    await Promise.all(pending);
    while (delivered < 2 * n) await new Promise((r) => setTimeout(r, 5));
    const took = (performance.now() - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const pg1 = postgresCpu(server.port);
    const pgCpu = pg1.total - pg0.total;
    const server1 = await serverCounters(counters);
    return {
      [toggled]: grouped,
      keptUp: (n / took / rate).toFixed(2),
      roundTrips: ((queries - q0 - 1) / n).toFixed(2),
      namedShare: ((named - named0) / Math.max(1, queries - q0 - 1)).toFixed(2),
      bcReads: ((b.reads() + c.reads() - r0) / n).toFixed(3),
      aProbes: ((a.probes() - p0) / n).toFixed(3),
      aReads: ((a.reads() - aReads0) / n).toFixed(3),
      byStatement: Object.fromEntries([...statements].map(([k, v]) => [k, +(v / n).toFixed(3)])),
      nodeCpuMs: ((cpu.user + cpu.system) / 1000 / n).toFixed(3),
      pgCpuMs: ((pgCpu * 1000) / n).toFixed(3),
      pgCpuMsBy: Object.fromEntries(
        [...pg1.by].map(([k, v]) => [k, +(((v - (pg0.by.get(k) ?? 0)) * 1000) / n).toFixed(3)]).filter(([, v]) => v),
      ),
      perEvent: Object.fromEntries(
        Object.entries(server1).map(([k, v]) => [
          k,
          +((v - server0[k]! - (k === 'xact_commit' ? 2 : 0)) / n).toFixed(3),
        ]),
      ),
      slowestDeliveryMs: lastDelay.toFixed(0),
    };
  };
  await round(true); // warm-up
  await round(false);
  for (let i = 0; i < rounds; i++)
    for (const g of i % 2 ? [false, true] : [true, false]) console.log(JSON.stringify(await round(g)));
  for (const r of [a, b, c]) {
    await r.bus.close();
    await r.store.close();
  }
  await counters.end();
} finally {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
