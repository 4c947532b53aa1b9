/**
 * Fan-out CPU per delivery of two gateways in this one process, rounds interleaved (A, B, A, B, …), each with its own
 * environment: an in-process A/B of a delivery shortcut against its off switch. Each round, the clients (a child
 * process, pinned apart when `taskset` is there) open `connections` graphql-ws connections to one gateway and
 * subscribe each to `ids` fresh auth_req_ids (the bench's subscription, bench/scenarios/fanout.ts); then one
 * notification per id goes to the webhook, one after the other; the round's CPU (process.cpuUsage, this process:
 * both gateways, the webhook client) runs from the first webhook to the last `complete` the clients get.
 *
 *   npx tsx bench/experiments/fanout-ab.ts [--connections 500] [--ids 10] [--rounds 8] [--b SUBSCRIPTION_COMPILED_SELECTION=false]
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { WebSocket } from 'ws';

import { loadConfig } from '../../src/config/index.js';
import type { Gateway } from '../../src/gateway/options.js';
import { startGateway } from '../../src/gateway/start.js';
import { createLogger } from '../../src/logger.js';
import { pin, placement } from '../lib/processes.js';
import { SUBSCRIPTION } from '../scenarios/fanout.js';
import { notificationBody } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    connections: { type: 'string', default: '500' },
    ids: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '8' },
    b: { type: 'string', default: 'SUBSCRIPTION_COMPILED_SELECTION=false' },
    clients: { type: 'boolean', default: false },
  },
});

const API_KEY = 'ab-api-key';
const TOKEN = 'ab-notification-token';

/** The child: opens connections and subscriptions on the parent's word, says when every subscription completed. */
function clients(): void {
  let sockets: WebSocket[] = [];
  process.on('message', async (m: { url: string; ids: string[]; connections: number } | 'close') => {
    if (m === 'close') {
      await Promise.all(sockets.map((ws) => new Promise<void>((r) => (ws.once('close', () => r()), ws.close()))));
      sockets = [];
      process.send!('closed');
      return;
    }
    let completes = 0;
    const want = m.connections * m.ids.length;
    sockets = await Promise.all(
      Array.from(
        { length: m.connections },
        () =>
          new Promise<WebSocket>((resolve, reject) => {
            const ws = new WebSocket(`${m.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
              perMessageDeflate: false,
            });
            ws.once('error', reject);
            ws.once('open', () =>
              ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${API_KEY}` } })),
            );
            ws.on('message', (data) => {
              const text = String(data);
              if (text.startsWith('{"type":"connection_ack"')) {
                m.ids.forEach((id, i) =>
                  ws.send(
                    JSON.stringify({
                      id: `s${i}`,
                      type: 'subscribe',
                      payload: { query: SUBSCRIPTION, variables: { authReqId: id } },
                    }),
                  ),
                );
                resolve(ws);
              } else if (text.includes('"type":"complete"') && ++completes === want) process.send!('done');
            });
          }),
      ),
    );
    process.send!('ready');
  });
}

async function gateway(env: Record<string, string>): Promise<Gateway> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fanout-ab-'));
  const config = loadConfig({
    GATEWAY_API_KEYS: API_KEY,
    MOBILEID_NOTIFICATION_TOKENS: TOKEN,
    SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
    ...env,
    DATA_DIR: dataDir,
  });
  return startGateway(config, { port: 0, host: '127.0.0.1', logger: createLogger({ level: 'warn' } as never) });
}

async function main(): Promise<void> {
  const place = placement();
  if (place.pinned) pin(process.pid, place.server!);
  const [name, value] = cli.b.split('=') as [string, string];
  const gateways = { A: await gateway({}), B: await gateway({ [name]: value }) };
  const child = fork(fileURLToPath(import.meta.url), ['--clients'], { execArgv: ['--import', 'tsx'] });
  if (place.pinned) pin(child.pid!, place.driver!);
  const said = (word: string) =>
    new Promise<void>((resolve) => {
      const on = (m: unknown) => {
        if (m !== word) return;
        child.off('message', on);
        resolve();
      };
      child.on('message', on);
    });
  const connections = Number(cli.connections);
  const idsPerRound = Number(cli.ids);
  const body = notificationBody();
  const per: Record<'A' | 'B', number[]> = { A: [], B: [] };
  const rounds = Number(cli.rounds);
  for (let r = 0; r < rounds * 2 + 2; r++) {
    const which = r % 2 === 0 ? 'A' : 'B';
    const gw = gateways[which];
    const ids = Array.from({ length: idsPerRound }, () => randomUUID());
    const ready = said('ready');
    child.send({ url: gw.url, ids, connections });
    await ready;
    const want = connections * idsPerRound;
    while (gw.services.events.bus.subscribers('mobile-id') < want) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 200));
    const done = said('done');
    const before = process.cpuUsage();
    for (const id of ids) {
      const res = await request(`${gw.url}/webhooks/mobile-id`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
        body: body.replace('{{uuid}}', id),
      });
      await res.body.dump();
      if (res.statusCode !== 204) throw new Error(`webhook answered ${res.statusCode}`);
    }
    await done;
    const used = process.cpuUsage(before);
    // The first round of each is a warm-up.
    if (r >= 2) per[which].push((used.user + used.system) / want);
    const closed = said('closed');
    child.send('close');
    await closed;
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  const a = median(per.A);
  const b = median(per.B);
  process.stdout.write(
    `µs CPU per delivery, median of ${rounds} rounds of ${connections * idsPerRound}: A (defaults) ${a.toFixed(2)}, ` +
      `B (${cli.b}) ${b.toFixed(2)}; A/B ${(a / b).toFixed(3)}\n` +
      `A ${per.A.map((v) => v.toFixed(1)).join(' ')}\nB ${per.B.map((v) => v.toFixed(1)).join(' ')}\n`,
  );
  child.kill();
  await Promise.all([gateways.A.close(), gateways.B.close()]);
}

if (cli.clients) clients();
else await main();
