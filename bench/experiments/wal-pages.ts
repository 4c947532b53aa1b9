/**
 * Which pages one mobile-ID notification at a time writes to the WAL (docs/decisions/080): starts the gateway (the
 * bench's environment, SQLITE_SYNCHRONOUS=FULL, data on the local disk), sends `--warm` notifications and then `--n`
 * more one at a time, copies the database and its WAL while the gateway is idle, and reads the WAL's frame headers:
 * the frames of the current WAL generation, grouped by commit, each page named by the b-tree it belongs to (SQLite's
 * dbstat table over the copy).
 *
 *   npx tsx bench/experiments/wal-pages.ts [--warm 2500] [--n 200] [--env NAME=VALUE,...]
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import SQLite from 'better-sqlite3';
import { Pool } from 'undici';

import { gatewayEnv, NOTIFICATION_TOKEN } from '../lib/env.js';
import { freePort, spawnNode, waitUntilIdle } from '../lib/processes.js';
import { notificationBody, WEBHOOK_PATH } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    warm: { type: 'string', default: '2500' },
    n: { type: 'string', default: '200' },
    env: { type: 'string' },
  },
});
const EXTRA_ENV = Object.fromEntries(
  (cli.env ? cli.env.split(',') : []).map((pair) => [
    pair.slice(0, pair.indexOf('=')),
    pair.slice(pair.indexOf('=') + 1),
  ]),
);
const template = notificationBody();
const headers = {
  'content-type': 'application/json',
  authorization: `Bearer ${NOTIFICATION_TOKEN}`,
  'x-mobileid-request-id': 'bench',
};

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-pages-'));
const port = await freePort();
const dataDir = path.join(root, 'gateway');
fs.mkdirSync(dataDir);
const gateway = await spawnNode('gateway', {
  script: 'src/main.ts',
  env: {
    ...gatewayEnv({ port, dataDir, stubUrl: 'http://127.0.0.1:9' }),
    SQLITE_SYNCHRONOUS: 'FULL',
    ...EXTRA_ENV,
  },
  cpus: null,
  readiness: { url: `http://127.0.0.1:${port}/readyz` },
  timeoutMs: 60_000,
});
const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });
async function send(count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await pool.request({
      method: 'POST',
      path: WEBHOOK_PATH,
      headers,
      body: template.replace('{{uuid}}', randomUUID()),
    });
    await res.body.text();
    if (res.statusCode !== 204) throw new Error(String(res.statusCode));
  }
}
try {
  await send(Number(cli.warm));
  await waitUntilIdle(gateway.pid, 3_000);
  const walBefore = fs.statSync(path.join(dataDir, 'gateway.sqlite-wal')).size;
  await send(Number(cli.n));
  await waitUntilIdle(gateway.pid, 3_000);
  const copy = path.join(root, 'copy');
  fs.mkdirSync(copy);
  for (const f of ['gateway.sqlite', 'gateway.sqlite-wal']) fs.copyFileSync(path.join(dataDir, f), path.join(copy, f));
  const wal = fs.readFileSync(path.join(copy, 'gateway.sqlite-wal'));
  const pageSize = wal.readUInt32BE(8);
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
  const db = new SQLite(path.join(copy, 'gateway.sqlite'), { readonly: true });
  const owner = new Map<number, string>();
  for (const row of db.prepare('select name, pageno, pagetype from dbstat').all() as Array<{
    name: string;
    pageno: number;
    pagetype: string;
  }>) {
    owner.set(row.pageno, `${row.name} (${row.pagetype})`);
  }
  owner.set(1, `page 1 (header, ${owner.get(1) ?? ''})`);
  const last = commits.slice(-Number(cli.n));
  const counts = new Map<string, number>();
  for (const c of last)
    for (const p of c)
      counts.set(
        owner.get(p) ?? `page ${p} (free or new)`,
        (counts.get(owner.get(p) ?? `page ${p} (free or new)`) ?? 0) + 1,
      );
  const frames = last.reduce((a, c) => a + c.length, 0);
  console.log(
    `page size ${pageSize}; WAL ${walBefore} → ${wal.length} bytes; ${commits.length} commits in the current WAL generation; the last ${last.length}: ${(frames / last.length).toFixed(2)} frames per commit`,
  );
  for (const [name, k] of [...counts].sort((a, b) => b[1] - a[1]))
    console.log(`  ${(k / last.length).toFixed(2)}  ${name}`);
  db.close();
} finally {
  await pool.close();
  await gateway.stop();
  fs.rmSync(root, { recursive: true, force: true });
}
process.exit(0);
