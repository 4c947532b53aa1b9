/**
 * CPU per mobile-ID notification of two checkouts (this one and `--base`, e.g. `git archive` of another commit with a
 * node_modules link), rounds interleaved (A, B, B, A, …): each a gateway process (`node --import tsx src/main.ts`,
 * the bench's environment, SQLITE_SYNCHRONOUS=FULL, the data directory on /dev/shm so that the disk does not hide the
 * CPU), fed scenario 4's success notifications (fresh auth_req_ids) in a closed loop of `--inflight` (8: commits
 * grouped; 1: each notification commits alone, as at a steady rate). A round's figure is the gateway process's CPU
 * (every thread: the checkpoint worker, libuv's pool) over its notifications; the first two rounds are warm-up.
 *
 *   npx tsx bench/experiments/intake-ab.ts --base /tmp/base [--rounds 12] [--n 3000] [--inflight 8]
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

import { closedLoop, processCpu } from '../lib/cpu.js';
import { gatewayEnv, NOTIFICATION_TOKEN } from '../lib/env.js';
import { freePort } from '../lib/processes.js';
import { notificationBody, WEBHOOK_PATH } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    base: { type: 'string' },
    rounds: { type: 'string', default: '12' },
    n: { type: 'string', default: '3000' },
    inflight: { type: 'string', default: '8' },
  },
});
if (!cli.base) throw new Error('--base <checkout> is required');
const rounds = Number(cli.rounds);
const n = Number(cli.n);
const inflight = Number(cli.inflight);
const template = notificationBody();

async function start(dir: string) {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join('/dev/shm', 'intake-ab-'));
  const origin = `http://127.0.0.1:${port}`;
  // No cloud call is made: the upstream address only has to be set.
  const env = {
    ...gatewayEnv({ port, dataDir, stubUrl: 'http://127.0.0.1:9' }),
    SQLITE_SYNCHRONOUS: 'FULL',
  };
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: dir,
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (;;) {
    try {
      if ((await fetch(`${origin}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, pid: child.pid!, pool: new Pool(origin, { connections: inflight }), dataDir };
}

const sides = { base: await start(cli.base), head: await start(process.cwd()) };
const headers = {
  'content-type': 'application/json',
  authorization: `Bearer ${NOTIFICATION_TOKEN}`,
  'x-mobileid-request-id': 'bench',
};
const perNotification: Record<keyof typeof sides, number[]> = { base: [], head: [] };
for (let r = 0; r < rounds; r++) {
  const order: (keyof typeof sides)[] = r % 2 ? ['head', 'base'] : ['base', 'head'];
  for (const name of order) {
    const s = sides[name];
    const c0 = processCpu(s.pid);
    await closedLoop(n, inflight, async () => {
      const res = await s.pool.request({
        method: 'POST',
        path: WEBHOOK_PATH,
        headers,
        body: template.replace('{{uuid}}', randomUUID()),
      });
      const text = await res.body.text();
      if (res.statusCode !== 204) throw new Error(`${res.statusCode} ${text}`);
    });
    perNotification[name].push(((processCpu(s.pid) - c0) / n) * 1e6);
  }
  console.log(
    `round ${r}: base ${perNotification.base.at(-1)!.toFixed(1)} µs, head ${perNotification.head.at(-1)!.toFixed(1)} µs`,
  );
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const base = perNotification.base.slice(2);
const head = perNotification.head.slice(2);
const ratios = head.map((h, i) => h / base[i]!).sort((x, y) => x - y);
console.log(
  `inflight ${inflight}: base ${median(base).toFixed(1)} µs, head ${median(head).toFixed(1)} µs per notification (medians); ` +
    `head/base median ${median(ratios).toFixed(3)}, range ${ratios[0]!.toFixed(3)}..${ratios.at(-1)!.toFixed(3)} over ${ratios.length} rounds`,
);
for (const s of Object.values(sides)) {
  await s.pool.close();
  s.child.kill();
  fs.rmSync(s.dataDir, { recursive: true, force: true });
}
process.exit(0);
