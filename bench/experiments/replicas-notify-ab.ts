/**
 * What each replica asks of PostgreSQL per notification, and the CPU it takes, with the NOTIFYs grouped
 * (EVENT_NOTIFY_GROUPED=true) and one per event (false), rounds interleaved in one process (docs/decisions/083);
 * with `probe` as the fourth argument, A's order probes grouped (EVENT_ORDER_PROBE_GROUPED=true) against one per
 * event (false), the NOTIFYs grouped in both (docs/decisions/086).
 * An embedded server, three buses (A, B, C) each with its own store and pool; A appends mobile-ID events through the
 * `EventLog` at a paced rate and publishes each (what the intake does after the commit), B and C have one subscriber
 * each to every event. Per round: round trips to PostgreSQL (every `pg.Client.query`, by statement), B's and C's reads of the log, CPU of this process and of every PostgreSQL process (/proc),
 * each divided by the events appended, and the delay from append to the last delivery on B and C.
 *
 *   npx tsx bench/experiments/replicas-notify-ab.ts [rate=1000] [seconds=4] [rounds=4] [notify|probe]
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
/** Which of A's switches the rounds alternate. */
const toggled = process.argv[5] === 'probe' ? 'groupProbes' : 'groupNotices';

let queries = 0;
/** Round trips by statement (its first words). */
const statements = new Map<string, number>();
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  queries++;
  const text = String((args[0] as { text?: string } | null)?.text ?? args[0]);
  const name = text.replace(/^(select \S+|\S+ \S+ \S+).*$/s, '$1');
  statements.set(name, (statements.get(name) ?? 0) + 1);
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof query;

const ticks = Number(fs.readFileSync('/proc/self/stat', 'utf8') && 100);
/** CPU seconds of the PostgreSQL server listening on `port` and of every backend it started. */
function postgresCpu(port: number): number {
  const procs = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  const stat = new Map<string, { ppid: string; cpu: number }>();
  let root: string | null = null;
  for (const p of procs) {
    try {
      const s = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      stat.set(p, { ppid: f[1]!, cpu: (Number(f[11]) + Number(f[12])) / ticks });
      if (root === null && fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').includes(String(port)))
        root = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('postgres') ? p : null;
    } catch {
      // gone
    }
  }
  let total = 0;
  for (const [p, s] of stat) if (p === root || s.ppid === root) total += s.cpu;
  return total;
}

const server = await startEmbeddedPostgres();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'replicas-notify-'));
try {
  const logger = createLogger({ level: 'silent' });
  const url = await server.createDatabase('replicas_notify');
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
    (a.bus as unknown as { options: Record<typeof toggled, boolean> }).options[toggled] = grouped;
    const n = rate * seconds;
    delivered = 0;
    lastDelay = 0;
    const q0 = queries;
    statements.clear();
    const r0 = b.reads() + c.reads();
    const aReads0 = a.reads();
    const p0 = a.probes();
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
    const pgCpu = postgresCpu(server.port) - pg0;
    return {
      [toggled]: grouped,
      keptUp: (n / took / rate).toFixed(2),
      roundTrips: ((queries - q0 - 1) / n).toFixed(2),
      bcReads: ((b.reads() + c.reads() - r0) / n).toFixed(3),
      aProbes: ((a.probes() - p0) / n).toFixed(3),
      aReads: ((a.reads() - aReads0) / n).toFixed(3),
      byStatement: Object.fromEntries([...statements].map(([k, v]) => [k, +(v / n).toFixed(3)])),
      nodeCpuMs: ((cpu.user + cpu.system) / 1000 / n).toFixed(3),
      pgCpuMs: ((pgCpu * 1000) / n).toFixed(3),
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
} finally {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
