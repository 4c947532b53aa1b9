/**
 * What a gateway's WAL holds, read from a copy of its database and WAL taken while it is idle: the frames of the
 * current WAL generation grouped by commit, and each page named by the b-tree it belongs to (SQLite's dbstat over the
 * copy). For bench/experiments/wal-pages.ts (a notification) and creation-wal-pages.ts (a creation).
 */
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';

import { gatewayEnv } from './env.js';
import { freePort, spawnNode, type Proc } from './processes.js';

/** Copies `dataDir`'s database and WAL into `copyDir`; returns the commits' page numbers and the pages' owners. */
export function walCommits(
  dataDir: string,
  copyDir: string,
): { pageSize: number; generation: number; commits: number[][]; owner(page: number): string } {
  fs.mkdirSync(copyDir, { recursive: true });
  for (const f of ['gateway.sqlite', 'gateway.sqlite-wal'])
    fs.copyFileSync(path.join(dataDir, f), path.join(copyDir, f));
  const wal = fs.readFileSync(path.join(copyDir, 'gateway.sqlite-wal'));
  const pageSize = wal.readUInt32BE(8);
  // The checkpoint sequence number: one more at each restart of the WAL.
  const generation = wal.readUInt32BE(12);
  const salt1 = wal.readUInt32BE(16);
  const salt2 = wal.readUInt32BE(20);
  const commits: number[][] = [];
  let current: number[] = [];
  for (let off = 32; off + 24 + pageSize <= wal.length; off += 24 + pageSize) {
    if (wal.readUInt32BE(off + 8) !== salt1 || wal.readUInt32BE(off + 12) !== salt2) break;
    current.push(wal.readUInt32BE(off));
    if (wal.readUInt32BE(off + 4) !== 0) {
      commits.push(current);
      current = [];
    }
  }
  const db = new SQLite(path.join(copyDir, 'gateway.sqlite'), { readonly: true });
  const owners = new Map<number, string>();
  try {
    for (const row of db.prepare('select name, pageno, pagetype from dbstat').all() as Array<{
      name: string;
      pageno: number;
      pagetype: string;
    }>)
      owners.set(row.pageno, `${row.name} (${row.pagetype})`);
  } finally {
    db.close();
  }
  owners.set(1, `page 1 (header, ${owners.get(1) ?? ''})`);
  return { pageSize, generation, commits, owner: (page) => owners.get(page) ?? `page ${page} (free or new)` };
}

/** Frames per `unit` by owner, most first, over `commits`. */
export function framesByOwner(commits: number[][], owner: (page: number) => string, units: number): [string, number][] {
  const counts = new Map<string, number>();
  for (const c of commits) for (const p of c) counts.set(owner(p), (counts.get(owner(p)) ?? 0) + 1);
  return [...counts].map(([name, k]): [string, number] => [name, k / units]).sort((a, b) => b[1] - a[1]);
}

/** A gateway from the sources, its data in `root`/gateway, FULL, as the bench configures it, plus `env`. */
export async function walGateway(
  root: string,
  stubUrl: string,
  env: Record<string, string>,
): Promise<{ gateway: Proc; dataDir: string; origin: string }> {
  const port = await freePort();
  const dataDir = path.join(root, 'gateway');
  fs.mkdirSync(dataDir);
  const gateway = await spawnNode('gateway', {
    script: 'src/main.ts',
    env: { ...gatewayEnv({ port, dataDir, stubUrl }), SQLITE_SYNCHRONOUS: 'FULL', ...env },
    cpus: null,
    readiness: { url: `http://127.0.0.1:${port}/readyz` },
    timeoutMs: 60_000,
  });
  return { gateway, dataDir, origin: `http://127.0.0.1:${port}` };
}
