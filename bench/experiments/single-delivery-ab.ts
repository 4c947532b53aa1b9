/**
 * The marginal CPU of one delivery to a waiting subscriber, measured as a difference inside one process, rounds
 * interleaved. Each round, the clients (a child process) open `waiting` graphql-ws connections to the gateway, one
 * subscription each on its own fresh auth_req_id (the subscription of scenarios 5 and 9); then `waiting` notifications
 * go to the webhook, `inFlight` at a time. In a "with" round each notification is for one of the waiting ids (a `next`
 * and a `complete` follow); in a "without" round each is for an id nobody waits for, so the same connections wait and
 * the same intake runs with no delivery. The round's CPU (process.cpuUsage: the gateway's threads and the webhook
 * client, the same in both) runs from the first webhook to the last 204 ("without") or to the last `complete` the
 * clients get ("with"). One delivery costs with − without, per pair of rounds; the median and the range of the pairs
 * are printed, and the same for the main thread alone (its /proc stat, 10 ms ticks). With `--b ENV=VALUE`, a second gateway in the same process runs with that environment and its rounds
 * are interleaved with the first's (A with, A without, B with, B without, …).
 *
 * `--only with` or `--only without` runs one kind of round alone, for a CPU profile of each (node --cpu-prof);
 * `--perf-ctl FIFO [--perf-ack FIFO]` turns `perf record -D -1 --control fifo:…` on for the measured windows only;
 * `--profile DIR` writes a V8 CPU profile of each round's measured window alone (100 µs sampling) into DIR.
 *
 * `--b-dist DIR` runs another tree's build (its dist/src) as B, for a plain rewrite that has no switch; `--a-dist DIR`
 * runs A from a build as well (this tree's dist/src after `npm run build`), so that both sides are compiled alike. The
 * pairs of A and B of the same round are compared as paired differences (A − B), with the load average at the end.
 *
 *   npx tsx bench/experiments/single-delivery-ab.ts [--waiting 300] [--in-flight 4] [--rounds 8] [--b NAME=VALUE]
 *     [--a-dist DIR --b-dist DIR]
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import inspector from 'node:inspector';
import os from 'node:os';
import { parseArgs } from 'node:util';

import type { Gateway } from '../../src/gateway/options.js';
import { notificationBody } from '../scenarios/webhook.js';
import {
  builtGateway,
  forkSubscriberClients,
  inProcessGateway,
  notify,
  subscriberClients,
} from './in-process-gateway.js';

const { values: cli } = parseArgs({
  options: {
    waiting: { type: 'string', default: '300' },
    'in-flight': { type: 'string', default: '4' },
    rounds: { type: 'string', default: '8' },
    b: { type: 'string' },
    /** Another tree's build (its dist/src) as B, in this process: for a plain rewrite, which has no switch. */
    'b-dist': { type: 'string' },
    /** A from a build too (this tree's dist/src, `npm run build` first), so that both sides run compiled alike. */
    'a-dist': { type: 'string' },
    /** `with` or `without` alone (for a CPU profile of one kind of round); both by default. */
    only: { type: 'string' },
    clients: { type: 'boolean', default: false },
    /** A directory: the V8 CPU profile of each measured window (first webhook to the last 204 or `complete`) is written there. */
    profile: { type: 'string' },
    /**
     * perf's control FIFO (`perf record -D -1 --control fifo:CTL,ACK`): perf counts only inside each measured window,
     * `with` or `without` ones as `--only` says.
     */
    'perf-ctl': { type: 'string' },
    'perf-ack': { type: 'string' },
  },
});

const session = cli.profile ? new inspector.Session() : undefined;
session?.connect();
const post = (method: string, params?: object): Promise<unknown> =>
  new Promise((resolve, reject) =>
    session!.post(method, params, (err, result) => (err ? reject(err) : resolve(result))),
  );
let profiled = 0;

/** perf's control and acknowledgement FIFOs, opened at the first use (perf opens its ends when it starts). */
let perfFds: [number, number | undefined] | undefined;
/** Tells perf to count (`enable`) or stop (`disable`), and waits for its acknowledgement. */
function perfControl(command: 'enable' | 'disable'): void {
  if (!cli['perf-ctl']) return;
  perfFds ??= [fs.openSync(cli['perf-ctl'], 'w'), cli['perf-ack'] ? fs.openSync(cli['perf-ack'], 'r') : undefined];
  fs.writeSync(perfFds[0], `${command}\n`);
  if (perfFds[1] !== undefined) fs.readSync(perfFds[1], Buffer.alloc(5));
}

/**
 * The main thread's CPU time in µs, from /proc (utime + stime of the thread whose id is the process's, in clock ticks
 * of 10 ms: over a round of 1,000 notifications, ±10 µs per notification).
 */
function mainThreadUs(): number {
  const stat = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
}

function gateway(env: Record<string, string>): Promise<Gateway> {
  return inProcessGateway('single-delivery-ab', env);
}

async function main(): Promise<void> {
  const named: Array<[string, Record<string, string>, string | undefined]> = [['A', {}, cli['a-dist']]];
  if (cli.b) {
    const [name, value] = cli.b.split('=') as [string, string];
    named.push(['B', { [name]: value }, cli['a-dist']]);
  } else if (cli['b-dist']) named.push([`B (build at ${cli['b-dist']})`, {}, cli['b-dist']]);
  const gateways = await Promise.all(
    named.map(([, env, dist]) => (dist ? builtGateway('single-delivery-ab', env, dist) : gateway(env))),
  );
  const { child, said } = forkSubscriberClients(import.meta.url);
  const waiting = Number(cli.waiting);
  const inFlight = Number(cli['in-flight']);
  const body = notificationBody();

  async function round(gw: Gateway, deliver: boolean): Promise<[number, number]> {
    const ids = Array.from({ length: waiting }, () => randomUUID());
    const ready = said('ready');
    child.send({ url: gw.url, groups: ids.map((id) => [id]) });
    await ready;
    while (gw.services.events.bus.subscribers('mobile-id') < waiting) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 200));
    const targets = deliver ? ids : ids.map(() => randomUUID());
    const done = deliver ? said('done') : Promise.resolve();
    if (session) {
      await post('Profiler.enable');
      await post('Profiler.setSamplingInterval', { interval: 100 });
      await post('Profiler.start');
    }
    perfControl('enable');
    const main0 = mainThreadUs();
    const before = process.cpuUsage();
    let next = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < targets.length) {
          await notify(gw.url, body, targets[next++]!);
        }
      }),
    );
    await done;
    const used = process.cpuUsage(before);
    const main = mainThreadUs() - main0;
    perfControl('disable');
    if (session) {
      const { profile } = (await post('Profiler.stop')) as { profile: unknown };
      fs.mkdirSync(cli.profile!, { recursive: true });
      fs.writeFileSync(
        `${cli.profile}/${deliver ? 'with' : 'without'}-${profiled++}.cpuprofile`,
        JSON.stringify(profile),
      );
    }
    const closed = said('closed');
    child.send('close');
    await closed;
    return [(used.user + used.system) / waiting, main / waiting];
  }

  const rounds = Number(cli.rounds);
  const marginal: number[][] = named.map(() => []);
  const withs: number[][] = named.map(() => []);
  const withouts: number[][] = named.map(() => []);
  const mainMarginal: number[][] = named.map(() => []);
  for (let r = 0; r <= rounds; r++) {
    for (let g = 0; g < gateways.length; g++) {
      // Alternate which of the pair goes first, so a drift in the machine's load falls on both alike.
      const order = cli.only ? [cli.only === 'with'] : r % 2 === 0 ? [true, false] : [false, true];
      const got: Record<string, number> = {};
      const gotMain: Record<string, number> = {};
      for (const deliver of order)
        [got[String(deliver)], gotMain[String(deliver)]] = await round(gateways[g]!, deliver);
      // The first pair of each gateway is a warm-up.
      if (r === 0 || cli.only) continue;
      withs[g]!.push(got.true!);
      withouts[g]!.push(got.false!);
      marginal[g]!.push(got.true! - got.false!);
      mainMarginal[g]!.push(gotMain.true! - gotMain.false!);
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  const f = (v: number[]) => v.map((x) => x.toFixed(1)).join(' ');
  let out = `µs CPU per notification, ${rounds} pairs of rounds of ${waiting} (${inFlight} in flight)\n`;
  if (cli.only) out = '';
  else
    named.forEach(([name, env], g) => {
      out +=
        `${name} ${JSON.stringify(env)}: one delivery ${median(marginal[g]!).toFixed(1)} ` +
        `(range ${Math.min(...marginal[g]!).toFixed(1)}–${Math.max(...marginal[g]!).toFixed(1)}); ` +
        `with ${median(withs[g]!).toFixed(1)}, without ${median(withouts[g]!).toFixed(1)}\n` +
        `  pairs: ${f(marginal[g]!)}\n` +
        `  main thread alone: ${median(mainMarginal[g]!).toFixed(1)} ` +
        `(range ${Math.min(...mainMarginal[g]!).toFixed(1)}–${Math.max(...mainMarginal[g]!).toFixed(1)}); pairs ${f(mainMarginal[g]!)}\n`;
    });
  if (named.length === 2 && !cli.only) {
    out += `A/B of one delivery: ${(median(marginal[0]!) / median(marginal[1]!)).toFixed(3)}\n`;
    // Paired by round: A's and B's rounds of the same r ran next to each other.
    for (const [what, v] of [
      ['process', marginal],
      ['main thread', mainMarginal],
    ] as const) {
      const d = v[0]!.map((a, i) => a - v[1]![i]!);
      out +=
        `paired A − B (${what}): median ${median(d).toFixed(1)}, range ${Math.min(...d).toFixed(1)}–` +
        `${Math.max(...d).toFixed(1)}, A lower in ${d.filter((x) => x < 0).length} of ${d.length}\n`;
    }
  }
  out += `load average ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}\n`;
  process.stdout.write(out);
  child.kill();
  await Promise.all(gateways.map((g) => g.close()));
}

if (cli.clients) subscriberClients();
else await main();
