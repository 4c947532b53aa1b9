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
import { Pool } from 'undici';

import { envPairs, NOTIFICATION_TOKEN } from '../lib/env.js';
import { waitUntilIdle } from '../lib/processes.js';
import { framesByOwner, walCommits, walGateway } from '../lib/wal-frames.js';
import { notificationBody, WEBHOOK_PATH } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    warm: { type: 'string', default: '2500' },
    n: { type: 'string', default: '200' },
    env: { type: 'string' },
  },
});
const template = notificationBody();
const headers = {
  'content-type': 'application/json',
  authorization: `Bearer ${NOTIFICATION_TOKEN}`,
  'x-mobileid-request-id': 'bench',
};

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-pages-'));
const { gateway, dataDir, origin } = await walGateway(root, 'http://127.0.0.1:9', envPairs(cli.env));
const pool = new Pool(origin, { connections: 1 });
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
  const { pageSize, commits, owner } = walCommits(dataDir, path.join(root, 'copy'));
  const wal = fs.statSync(path.join(dataDir, 'gateway.sqlite-wal'));
  const last = commits.slice(-Number(cli.n));
  const frames = last.reduce((a, c) => a + c.length, 0);
  console.log(
    `page size ${pageSize}; WAL ${walBefore} → ${wal.size} bytes; ${commits.length} commits in the current WAL generation; the last ${last.length}: ${(frames / last.length).toFixed(2)} frames per commit`,
  );
  for (const [name, k] of framesByOwner(last, owner, last.length)) console.log(`  ${k.toFixed(2)}  ${name}`);
} finally {
  await pool.close();
  await gateway.stop();
  fs.rmSync(root, { recursive: true, force: true });
}
process.exit(0);
