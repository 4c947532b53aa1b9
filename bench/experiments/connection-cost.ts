/**
 * What a new connection costs a server, beside the creation it carries: scenario 1's `createNetwork` (FULL, a fresh key
 * each) on the gateway (this checkout's dist/, as its `npm start` runs it; `npm run build` first) and on the durable
 * baseline, pinned as the bench places them. Per round and server, `--n` creations 16 at a time over kept connections,
 * then `--n` more each on a connection of its own (a new undici Client, closed after its answer): the server's CPU
 * (every thread, /proc) per creation both ways, and the difference, what one connection's accept, first request on
 * it and close cost. Scenario 2's open loop opens a pool per block, so a block's first moments open many.
 *
 *   npx tsx bench/experiments/connection-cost.ts [--rounds 3] [--n 1500]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Pool } from 'undici';

import { startNodeArgs } from '../lib/build.js';
import { closedLoop, processCpu } from '../lib/cpu.js';
import { API_KEY, gatewayEnv } from '../lib/env.js';
import { durableBaselineArgs, seedDurableBaseline } from '../lib/mutation-references.js';
import { freePort, pin, placement, ROOT, spawnNode, waitUntilIdle, type Proc } from '../lib/processes.js';
import { createNetworkBody } from '../scenarios/mutation.js';

const { values: cli } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, n: { type: 'string', default: '1500' } },
});
const rounds = Number(cli.rounds);
const n = Number(cli.n);
const place = placement();
if (place.driver) pin(process.pid, place.driver);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'connection-cost-'));
const procs: Proc[] = [];

interface Server {
  name: string;
  proc: Proc;
  origin: string;
  path: string;
  body: string;
}

try {
  const stub = await spawnNode('upstream', {
    script: 'bench/servers/upstream.ts',
    cpus: place.driver,
    readiness: { line: true },
  });
  procs.push(stub);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  fs.mkdirSync(path.join(root, 'gateway'));
  const gw = await spawnNode('gateway', {
    script: path.join(ROOT, 'dist/src/main.js'),
    nodeArgs: startNodeArgs(ROOT),
    cpus: place.server,
    env: {
      ...gatewayEnv({ port, dataDir: path.join(root, 'gateway'), stubUrl: String(stub.ready.url) }),
      SQLITE_SYNCHRONOUS: 'FULL',
    },
    readiness: { url: `${origin}/readyz` },
    timeoutMs: 60_000,
  });
  procs.push(gw);
  const body = await createNetworkBody(origin, 'connections');
  fs.mkdirSync(path.join(root, 'durable'));
  const durable = await spawnNode('durable baseline', {
    script: 'bench/servers/durable-baseline.ts',
    args: durableBaselineArgs(String(stub.ready.url), path.join(root, 'durable')),
    cpus: place.server,
    readiness: { line: true },
  });
  procs.push(durable);
  const projectId = (JSON.parse(body) as { variables: { input: { projectId: string } } }).variables.input.projectId;
  await seedDurableBaseline(String(durable.ready.url), projectId);
  const servers: Server[] = [
    { name: 'gateway', proc: gw, origin, path: '/graphql', body },
    { name: 'durable baseline', proc: durable, origin: String(durable.ready.url), path: '/mutation', body },
  ];

  const send = async (dispatcher: Pool | Client, s: Server): Promise<void> => {
    const res = await dispatcher.request({
      method: 'POST',
      path: s.path,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: s.body.replace('{{uuid}}', crypto.randomUUID()),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200 || text.includes('"errors"')) throw new Error(`${s.name}: ${res.statusCode} ${text}`);
  };
  /** µs of the server's CPU per creation: `n` creations, 16 at a time, kept or each on a new connection. */
  const measure = async (s: Server, fresh: boolean): Promise<number> => {
    const pool = fresh ? null : new Pool(s.origin, { connections: 16, pipelining: 1 });
    await waitUntilIdle(s.proc.pid, 2_000);
    const before = processCpu(s.proc.pid);
    await closedLoop(n, 16, async () => {
      if (pool) return send(pool, s);
      const client = new Client(s.origin, { pipelining: 1 });
      try {
        await send(client, s);
      } finally {
        await client.close();
      }
    });
    const us = ((processCpu(s.proc.pid) - before) / n) * 1e6;
    await pool?.close();
    return us;
  };
  for (const s of servers) {
    await measure(s, false);
    await measure(s, true);
  }
  const results = new Map(servers.map((s) => [s.name, [] as Array<[number, number]>]));
  for (let r = 0; r < rounds; r++) {
    for (const s of r % 2 ? [...servers].reverse() : servers) {
      const kept = await measure(s, false);
      const fresh = await measure(s, true);
      results.get(s.name)!.push([kept, fresh]);
      console.log(
        `round ${r} ${s.name}: kept ${kept.toFixed(1)} µs, new connection ${fresh.toFixed(1)} µs (+${(fresh - kept).toFixed(1)})`,
      );
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  for (const [name, rows] of results) {
    console.log(
      `${name}: median kept ${median(rows.map((x) => x[0])).toFixed(1)} µs, new connection ${median(rows.map((x) => x[1])).toFixed(1)} µs, a connection +${median(rows.map((x) => x[1] - x[0])).toFixed(1)} µs`,
    );
  }
} finally {
  for (const p of procs) p.child.kill('SIGKILL');
  fs.rmSync(root, { recursive: true, force: true });
}
