/**
 * PostgreSQL's CPU for one append to the event log, its statement named (STORE_PG_NAMED_STATEMENTS=true: parsed and
 * planned once per connection) or unnamed (parsed, analysed and planned every call), blocks alternating ABBA in one
 * process (docs/decisions/104). One embedded server, two stores (one each way), appends one after another (no
 * concurrency: each commit syncs the WAL alone), the CPU of every PostgreSQL process from /proc, user and kernel, per
 * append.
 *
 *   npx tsx bench/experiments/append-named-cpu.ts [appends per block=2000] [pairs=4]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startEmbeddedPostgres } from '../../scripts/embedded-postgres.js';
import { EventLog } from '../../src/events/log.js';
import { createLogger } from '../../src/logger.js';
import { openStore } from '../../src/store/index.js';
import { sampleAppend } from './sample-event.js';

const perBlock = Number(process.argv[2] ?? 2000);
const pairs = Number(process.argv[3] ?? 4);
const ticks = 100;

/**
 * User and kernel CPU seconds of the server listening on `port` and of every process it started, by process id (a
 * sum over processes would drop the CPU of a pooled connection that closed when idle, mid-block).
 */
function postgresCpu(port: number): Map<string, { user: number; kernel: number }> {
  let root: string | null = null;
  const stat = new Map<string, { ppid: string; user: number; kernel: number }>();
  for (const p of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const s = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      stat.set(p, { ppid: f[1]!, user: Number(f[11]) / ticks, kernel: Number(f[12]) / ticks });
      const cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
      if (root === null && cmd.split('\0').includes(String(port)) && cmd.includes('postgres')) root = p;
    } catch {
      // gone
    }
  }
  const out = new Map<string, { user: number; kernel: number }>();
  for (const [p, s] of stat) if (p === root || s.ppid === root) out.set(p, s);
  return out;
}

/** The CPU spent between two readings by the processes alive at the second. */
function spent(
  before: Map<string, { user: number; kernel: number }>,
  after: Map<string, { user: number; kernel: number }>,
): { user: number; kernel: number } {
  let user = 0;
  let kernel = 0;
  for (const [p, s] of after) {
    user += s.user - (before.get(p)?.user ?? 0);
    kernel += s.kernel - (before.get(p)?.kernel ?? 0);
  }
  return { user, kernel };
}

const server = await startEmbeddedPostgres();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'append-named-'));
try {
  const logger = createLogger({ level: 'silent' });
  const url = await server.createDatabase('append_named');
  const logs = new Map<boolean, { log: EventLog; close: () => Promise<void> }>();
  for (const named of [true, false]) {
    const store = await openStore({
      dataDir: path.join(dir, String(named)),
      databaseUrl: url,
      logger,
      pgNamedStatements: named,
    });
    logs.set(named, {
      log: new EventLog(store.db, 86_400_000, store.dialect, store.execute),
      close: () => store.close(),
    });
  }
  const block = async (named: boolean) => {
    const { log } = logs.get(named)!;
    const pg0 = postgresCpu(server.port);
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    for (let i = 0; i < perBlock; i++) await log.append(sampleAppend());
    const wall = performance.now() - start;
    const cpu = process.cpuUsage(cpu0);
    const pg = spent(pg0, postgresCpu(server.port));
    return {
      named,
      pgUserMs: +((pg.user * 1000) / perBlock).toFixed(3),
      pgKernelMs: +((pg.kernel * 1000) / perBlock).toFixed(3),
      nodeCpuMs: +((cpu.user + cpu.system) / 1000 / perBlock).toFixed(3),
      wallMs: +(wall / perBlock).toFixed(3),
      load: os.loadavg()[0]!.toFixed(1),
    };
  };
  await block(true); // warm-up
  await block(false);
  for (let i = 0; i < pairs; i++)
    for (const named of i % 2 ? [false, true] : [true, false]) console.log(JSON.stringify(await block(named)));
  for (const { close } of logs.values()) await close();
} finally {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
