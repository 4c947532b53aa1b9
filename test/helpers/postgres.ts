import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { sql, type Kysely } from 'kysely';

import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../scripts/embedded-postgres.js';
import { startTestGateway, type TestGateway } from './gateway.js';

export type TestPostgres = EmbeddedPostgres;

/**
 * A real PostgreSQL server from the embedded-postgres package's binaries, on a free port with its data in a
 * temporary folder. Works as root from any checkout (docs/decisions/025); stop() removes it.
 */
export function startPostgres(): Promise<TestPostgres> {
  return startEmbeddedPostgres();
}

export interface Replicas {
  a: TestGateway;
  b: TestGateway;
  /** Closes both gateways, then stops PostgreSQL. */
  close(): Promise<void>;
}

/**
 * Two gateways on one database of a new embedded PostgreSQL, as two replicas of one deployment: they share the
 * database and the key that encrypts stored tokens (TOKEN_ENCRYPTION_KEY), plus `env`.
 */
export async function startReplicas(database: string, env: Record<string, string> = {}): Promise<Replicas> {
  const pg = await startPostgres();
  const shared = {
    DATABASE_URL: await pg.createDatabase(database),
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    ...env,
  };
  const a = await startTestGateway(shared);
  const b = await startTestGateway(shared);
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await pg.stop();
    },
  };
}

let clockTicks: number | undefined;

/** Fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses). */
function procStat(pid: number): string[] | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null; // gone meanwhile
  }
}

/**
 * CPU time (user + system, in ms) the PostgreSQL server behind `db` has used so far: its postmaster, every live
 * process it started (backends, background processes) and those it reaped (closed connections, finished autovacuum
 * workers). Read from /proc, so Linux only; the difference of two readings is what the server spent in between.
 */
export async function postgresCpuMs(db: Kysely<any>): Promise<number> {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  // Fields from the state on: 0 state, 1 ppid, …, 11 utime, 12 stime, 13 cutime, 14 cstime.
  const postmaster = Number(procStat(rows[0]!.pid)![1]);
  const own = procStat(postmaster)!;
  let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (stat && Number(stat[1]) === postmaster) ticks += Number(stat[11]) + Number(stat[12]);
  }
  return (ticks * 1000) / clockTicks;
}
