/**
 * The WebSocket keep-alive's pings and timers at `n` connections, counted (not timed): the built gateway in this
 * process (as subscription-census.ts starts it), the clients in a child process, each connection with one pending
 * `mobileIdAuthentication` subscription. With `--chatter MS` every connection sends a graphql-ws `ping` message every
 * MS ms (spread over the interval), as the realistic mix's connections subscribe again after each result; without it,
 * every connection is quiet. After `--warm` ms, for `--window` ms: the WebSocket pings the gateway sent
 * (WebSocket.prototype.ping), the timers it made (async_hooks `Timeout` inits) and the timer callbacks that ran
 * (`Timeout` befores), per second, and the connections it terminated. Run once per WS_KEEP_ALIVE_SWEEP value.
 *
 *   npm run build && npx tsx bench/experiments/keep-alive-count.ts [--n 10000] [--chatter 4000] [--env WS_KEEP_ALIVE_SWEEP=false]
 */
import { createHook } from 'node:async_hooks';
import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';

import { SUBSCRIPTION } from '../scenarios/fanout.js';
import { API_KEY, builtGateway } from './in-process-gateway.js';

const { values: cli } = parseArgs({
  options: {
    n: { type: 'string', default: '10000' },
    chatter: { type: 'string' },
    warm: { type: 'string', default: '15000' },
    window: { type: 'string', default: '24000' },
    env: { type: 'string', multiple: true, default: [] },
    clients: { type: 'boolean', default: false },
  },
});

/** The child: `n` connections, each acknowledged and subscribed once; with `chatter`, a graphql-ws ping from each every `chatter` ms. */
function clients(): void {
  process.once('message', async (m: { url: string; n: number; chatter: number | null }) => {
    const open = async (i: number) => {
      const ws = new WebSocket(`${m.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
        perMessageDeflate: false,
      });
      await new Promise<void>((resolve, reject) => {
        ws.once('error', reject);
        ws.once('open', () =>
          ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${API_KEY}` } })),
        );
        ws.on('message', (data) => {
          if (!String(data).startsWith('{"type":"connection_ack"')) return;
          ws.send(
            JSON.stringify({
              id: 's',
              type: 'subscribe',
              payload: { query: SUBSCRIPTION, variables: { authReqId: `keep-alive-${i}` } },
            }),
          );
          resolve();
        });
      });
      if (m.chatter !== null) {
        const chatter = m.chatter;
        setTimeout(() => setInterval(() => ws.send('{"type":"ping"}'), chatter), (i * chatter) / m.n);
      }
    };
    for (let i = 0; i < m.n; i += 200)
      await Promise.all(Array.from({ length: Math.min(200, m.n - i) }, (_, k) => open(i + k)));
    process.send!('ready');
  });
}

async function main(): Promise<void> {
  const n = Number(cli.n);
  const env = Object.fromEntries(cli.env.map((e) => e.split('=') as [string, string]));
  const gw = await builtGateway('keep-alive-count', env, path.resolve(import.meta.dirname, '../../dist/src'));

  const counts = { pings: 0, terminated: 0, timersMade: 0, timerCallbacks: 0 };
  const ping = WebSocket.prototype.ping;
  WebSocket.prototype.ping = function (this: WebSocket, ...args: Parameters<WebSocket['ping']>) {
    counts.pings++;
    return ping.apply(this, args);
  };
  const terminate = WebSocket.prototype.terminate;
  WebSocket.prototype.terminate = function (this: WebSocket) {
    counts.terminated++;
    return terminate.call(this);
  };
  const timeouts = new Set<number>();
  const hook = createHook({
    init(id, type) {
      if (type !== 'Timeout') return;
      timeouts.add(id);
      counts.timersMade++;
    },
    before(id) {
      if (timeouts.has(id)) counts.timerCallbacks++;
    },
    destroy(id) {
      timeouts.delete(id);
    },
  });

  // On before the connections open, so that every timer they make is known when its callback runs in the window.
  hook.enable();
  const child = fork(fileURLToPath(import.meta.url), ['--clients'], { execArgv: ['--import', 'tsx'] });
  const ready = new Promise<void>((resolve) => child.once('message', () => resolve()));
  child.send({ url: gw.url, n, chatter: cli.chatter ? Number(cli.chatter) : null });
  await ready;
  while (gw.services.events.bus.subscribers('mobile-id') < n) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, Number(cli.warm)));
  const start = { ...counts };
  const seconds = Number(cli.window) / 1000;
  await new Promise((r) => setTimeout(r, Number(cli.window)));
  hook.disable();
  const per = (k: keyof typeof counts) => ((counts[k] - start[k]) / seconds).toFixed(1);
  process.stdout.write(
    `${n} connections, ${cli.chatter ? `each sending every ${cli.chatter} ms` : 'quiet'} ${JSON.stringify(env)}, ` +
      `${seconds} s counted: pings/s ${per('pings')}, timers made/s ${per('timersMade')}, ` +
      `timer callbacks/s ${per('timerCallbacks')}, terminated ${counts.terminated - start.terminated}\n`,
  );
  child.kill();
  await gw.close();
}

if (cli.clients) clients();
else await main();
