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
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import type { Gateway } from '../../src/gateway/options.js';
import { pin, placement } from '../lib/processes.js';
import { notificationBody } from '../scenarios/webhook.js';
import { forkSubscriberClients, inProcessGateway, notify, subscriberClients } from './in-process-gateway.js';

const { values: cli } = parseArgs({
  options: {
    connections: { type: 'string', default: '500' },
    ids: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '8' },
    b: { type: 'string', default: 'SUBSCRIPTION_COMPILED_SELECTION=false' },
    clients: { type: 'boolean', default: false },
  },
});

function gateway(env: Record<string, string>): Promise<Gateway> {
  return inProcessGateway('fanout-ab', env);
}

async function main(): Promise<void> {
  const place = placement();
  if (place.pinned) pin(process.pid, place.server!);
  const [name, value] = cli.b.split('=') as [string, string];
  const gateways = { A: await gateway({}), B: await gateway({ [name]: value }) };
  const { child, said } = forkSubscriberClients(import.meta.url);
  if (place.pinned) pin(child.pid!, place.driver!);
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
    child.send({ url: gw.url, groups: Array.from({ length: connections }, () => ids) });
    await ready;
    const want = connections * idsPerRound;
    while (gw.services.events.bus.subscribers('mobile-id') < want) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 200));
    const done = said('done');
    const before = process.cpuUsage();
    for (const id of ids) await notify(gw.url, body, id);
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

if (cli.clients) subscriberClients();
else await main();
