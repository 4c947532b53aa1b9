/**
 * Which pages a creation writes to the WAL: the gateway (the bench's environment, SQLITE_SYNCHRONOUS=FULL, data on
 * the local disk) over the bench's upstream stub, `--warm` creations (scenario 1's createNetwork, a fresh key each)
 * and then `--n` more, `--inflight` at a time; then, the gateway idle, the frames of the commits the `--n` wrote, by
 * the b-tree each page belongs to (bench/lib/wal-frames.ts), per creation. Each frame is two `pwrite64` calls (its
 * header, its page).
 *
 *   npx tsx bench/experiments/creation-wal-pages.ts [--warm 3000] [--n 2000] [--inflight 32] [--env NAME=VALUE,...]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

import { envPairs } from '../lib/env.js';
import { spawnNode, waitUntilIdle } from '../lib/processes.js';
import { framesByOwner, walCommits, walGateway } from '../lib/wal-frames.js';
import { createNetworkBody, createOnce } from '../scenarios/mutation.js';

const { values: cli } = parseArgs({
  options: {
    warm: { type: 'string', default: '3000' },
    n: { type: 'string', default: '2000' },
    inflight: { type: 'string', default: '32' },
    env: { type: 'string' },
  },
});
const inflight = Number(cli.inflight);

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'creation-wal-pages-'));
const stub = await spawnNode('upstream', {
  script: 'bench/servers/upstream.ts',
  cpus: null,
  readiness: { line: true },
});
const { gateway, dataDir, origin } = await walGateway(root, String(stub.ready.url), envPairs(cli.env));
const pool = new Pool(origin, { connections: inflight });
async function create(count: number): Promise<void> {
  const body = await createNetworkBody(origin, 'wal');
  let left = count;
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (left-- > 0) await createOnce(pool, body);
    }),
  );
}
try {
  await create(Number(cli.warm));
  await waitUntilIdle(gateway.pid, 3_000);
  const before = walCommits(dataDir, path.join(root, 'before'));
  const n = Number(cli.n);
  await create(n);
  await waitUntilIdle(gateway.pid, 3_000);
  const { pageSize, generation, commits, owner } = walCommits(dataDir, path.join(root, 'after'));
  // The measured commits follow the warm-up's in the same WAL generation; or, when the idle gateway's checkpoint had
  // copied every frame, the first measured write restarted the WAL and they are the whole of the next one.
  if (generation > before.generation + 1)
    throw new Error(`the WAL restarted ${generation - before.generation} times meanwhile: take fewer (--n)`);
  const measured = generation === before.generation ? commits.slice(before.commits.length) : commits;
  if (generation !== before.generation)
    console.log('the WAL restarted once: its commits are taken as the measured ones (a later restart would drop some)');
  const frames = measured.reduce((a, c) => a + c.length, 0);
  console.log(
    `page size ${pageSize}; ${n} creations, ${inflight} in flight: ${measured.length} commits (${(n / measured.length).toFixed(2)} creations a commit), ${(frames / n).toFixed(2)} frames a creation, ${(frames / measured.length).toFixed(1)} a commit`,
  );
  for (const [name, k] of framesByOwner(measured, owner, n)) console.log(`  ${k.toFixed(3)}  ${name}`);
} finally {
  await pool.close();
  await gateway.stop();
  await stub.stop();
  fs.rmSync(root, { recursive: true, force: true });
}
process.exit(0);
