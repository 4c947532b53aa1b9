/**
 * A gateway started in the experiment's own process, on its own data directory in the system's temporary folder,
 * with the sandbox upstreams, an API key and a mobile-ID notification token: what the in-process A/B experiments
 * (fanout-ab.ts, single-delivery-ab.ts) measure side by side, one per variant.
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { WebSocket } from 'ws';

import { loadConfig } from '../../src/config/index.js';
import type { Gateway } from '../../src/gateway/options.js';
import { startGateway } from '../../src/gateway/start.js';
import { createLogger } from '../../src/logger.js';
import { SUBSCRIPTION } from '../scenarios/fanout.js';

export const API_KEY = 'ab-api-key';
export const TOKEN = 'ab-notification-token';

/** The experiments' data directories, removed when the process ends (its last gateway closed, or a signal). */
const dataDirs: string[] = [];
function dataDir(prefix: string): string {
  if (dataDirs.length === 0) {
    process.once('exit', () => {
      for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true });
    });
    process.once('SIGINT', () => process.exit(130));
    process.once('SIGTERM', () => process.exit(143));
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  dataDirs.push(dir);
  return dir;
}

let warned = false;

/**
 * Says once on stderr when this process runs without NODE_ENV=production: graphql-js, which this module's imports
 * loaded, read it then and runs in its development mode, whose type tests also look for a second copy of graphql-js
 * (~19 µs per notification of the mix that `npm start`, which sets it first, does not spend: src/config/node-env.ts).
 */
function checkNodeEnv(): void {
  if (warned || process.env.NODE_ENV === 'production') return;
  warned = true;
  process.stderr.write(
    'note: NODE_ENV is not production, so graphql-js runs in its development mode, slower than npm start runs the ' +
      'gateway: run the experiment with NODE_ENV=production\n',
  );
}

/** The experiments' gateway environment: `env` over the defaults above, on a fresh data directory named `prefix-…`. */
function experimentEnv(prefix: string, env: Record<string, string>): Record<string, string> {
  checkNodeEnv();
  return {
    GATEWAY_API_KEYS: API_KEY,
    MOBILEID_NOTIFICATION_TOKENS: TOKEN,
    SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
    ...env,
    DATA_DIR: dataDir(prefix),
  };
}

/** A gateway with `env` over the defaults above; its data directory's name starts with `prefix`. */
export function inProcessGateway(prefix: string, env: Record<string, string>): Promise<Gateway> {
  const config = loadConfig(experimentEnv(prefix, env));
  return startGateway(config, { port: 0, host: '127.0.0.1', logger: createLogger({ level: 'warn' } as never) });
}

/** The same from a build (`dist`: a tree's dist/src, as `npm start` runs it), in this process. */
export async function builtGateway(prefix: string, env: Record<string, string>, dist: string): Promise<Gateway> {
  const built = {
    config: (await import(`${dist}/config/index.js`)) as typeof import('../../src/config/index.js'),
    start: (await import(`${dist}/gateway/start.js`)) as typeof import('../../src/gateway/start.js'),
    logger: (await import(`${dist}/logger.js`)) as typeof import('../../src/logger.js'),
  };
  const config = built.config.loadConfig(experimentEnv(prefix, env));
  const logger = built.logger.createLogger({ level: 'warn' } as never);
  return built.start.startGateway(config, { port: 0, host: '127.0.0.1', logger });
}

/** One mobile-ID notification for `id` (`body` from scenarios/webhook.ts), answered 204 or thrown. */
export async function notify(url: string, body: string, id: string): Promise<void> {
  const res = await request(`${url}/webhooks/mobile-id`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
    body: body.replace('{{uuid}}', id),
  });
  await res.body.dump();
  if (res.statusCode !== 204) throw new Error(`webhook answered ${res.statusCode}`);
}

/**
 * A client's graphql-ws connection to the gateway at `url` (its http:// address): `connection_init` with the
 * experiments' key, pings answered; `acknowledged` once the gateway acknowledged it, `message` with every other
 * message's text, `failed` on a socket error.
 */
export function clientSocket(
  url: string,
  acknowledged: () => void,
  message: (text: string) => void,
  failed: (err: Error) => void,
): WebSocket {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
    perMessageDeflate: false,
  });
  ws.once('error', failed);
  ws.once('open', () =>
    ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${API_KEY}` } })),
  );
  ws.on('message', (data) => {
    const text = String(data);
    if (text.startsWith('{"type":"connection_ack"')) acknowledged();
    else if (text.startsWith('{"type":"ping"')) ws.send('{"type":"pong"}');
    else message(text);
  });
  return ws;
}

/** A round of the clients: its ids by connection, what each subscription got, each connection's latest socket. */
interface Round {
  groups: string[][];
  got: Got[][];
  sockets: WebSocket[];
}

/** What one subscription of the clients got, for a stalled run's account (`dump`). */
interface Got {
  nexts: number;
  completes: number;
  /** Any other message for it (an `error`), as received. */
  other: string | null;
}

/**
 * The subscribers' side of an experiment, for a child process: on the parent's word `{ url, groups }` it opens one
 * graphql-ws connection per group and subscribes on it once per id of the group (to that id's mobile-ID outcome),
 * says `ready` when every connection has its subscriptions, and `done` when every subscription completed (then
 * `{ arrivals }`: when each `next` arrived, by the index of its id); on `close` it closes them all and says `closed`.
 * On `dump` it writes to its stderr what each connection got (the subscriptions not completed, by connection and id,
 * with their socket's state) and says `dumped`: a stalled run's account (fanout-ab's watchdog). A connection the
 * gateway closes, or a message for a subscription that is neither `next` nor `complete`, is written to stderr at once.
 */
export function subscriberClients(): void {
  let sockets: WebSocket[] = [];
  let round: Round | null = null;
  let closing = false;
  process.on('message', async (m: { url: string; groups: string[][] } | 'close' | 'dump') => {
    if (m === 'dump') {
      dumpClients(round);
      process.send!('dumped');
      return;
    }
    if (m === 'close') {
      closing = true;
      // A socket the gateway closed already gets no second 'close' event: waiting for one would never end.
      await Promise.all(
        sockets.map((ws) =>
          ws.readyState === ws.CLOSED ? undefined : new Promise<void>((r) => (ws.once('close', () => r()), ws.close())),
        ),
      );
      sockets = [];
      closing = false;
      process.send!('closed');
      return;
    }
    let completes = 0;
    const want = m.groups.reduce((n, ids) => n + ids.length, 0);
    /** When each `next` arrived (ms since the epoch, this machine's clock), by the index of its id in the group. */
    const arrivals: number[][] = [];
    const got: Got[][] = m.groups.map((ids) => ids.map(() => ({ nexts: 0, completes: 0, other: null })));
    round = { groups: m.groups, got, sockets: [] };
    /** Connections closed before their ack and opened again, by the close's code and reason. */
    const reopened = new Map<string, number>();
    const opened = round.sockets;
    sockets = await Promise.all(
      m.groups.map(
        (ids, c) =>
          new Promise<WebSocket>((resolve, reject) => {
            /**
             * A connection the gateway closes before its ack is opened again: graphql-ws closes one whose
             * `connection_init` it has not read within 3 s (4408), which a loaded machine opening a thousand at once
             * meets; waiting for its ack would wait for ever (a run that stopped with no output, decision 103).
             */
            const open = (attempt: number): void => {
              let acknowledged = false;
              const ws: WebSocket = (opened[c] = clientSocket(
                m.url,
                () => {
                  acknowledged = true;
                  ids.forEach((id, i) =>
                    ws.send(
                      JSON.stringify({
                        id: `s${i}`,
                        type: 'subscribe',
                        payload: { query: SUBSCRIPTION, variables: { authReqId: id } },
                      }),
                    ),
                  );
                  resolve(ws);
                },
                (text) => received(text),
                // A socket error is followed by its close (below).
                (err) => process.stderr.write(`clients: connection ${c}: ${err.message}\n`),
              ));
              ws.on('close', (code, reason) => {
                if (acknowledged) {
                  if (!closing)
                    process.stderr.write(`clients: connection ${c} closed by the gateway: ${code} ${reason}\n`);
                  return;
                }
                const why = `${code} ${reason}`;
                reopened.set(why, (reopened.get(why) ?? 0) + 1);
                if (attempt < 5) open(attempt + 1);
                else reject(new Error(`connection ${c} closed before its ack ${attempt} times`));
              });
            };
            const received = (text: string): void => {
              if (!text.startsWith('{"id":"s')) return;
              const i = Number(text.slice(8, text.indexOf('"', 8)));
              const sub = got[c]![i]!;
              if (text.includes('"type":"next"')) {
                sub.nexts += 1;
                (arrivals[i] ??= []).push(performance.timeOrigin + performance.now());
              } else if (text.includes('"type":"complete"')) sub.completes += 1;
              else {
                sub.other = text.slice(0, 300);
                process.stderr.write(`clients: connection ${c}, s${i} (${ids[i]}): ${sub.other}\n`);
              }
              if (text.includes('"type":"complete"') && ++completes === want) {
                process.send!('done');
                process.send!({ arrivals });
              }
            };
            open(1);
          }),
      ),
    );
    for (const [why, n] of reopened)
      process.stderr.write(`clients: ${n} connections closed before their ack (${why}), opened again\n`);
    process.send!('ready');
  });
}

/** The clients' account of a round (see subscriberClients): every subscription not completed, and the sockets' states. */
function dumpClients(round: Round | null): void {
  const out: string[] = [];
  const states = ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED'];
  if (round === null) out.push('clients: no round');
  else {
    const sockets = round.sockets;
    const bySocket = new Map<string, number>();
    for (const ws of sockets) bySocket.set(states[ws.readyState]!, (bySocket.get(states[ws.readyState]!) ?? 0) + 1);
    out.push(`clients: ${sockets.length} connections (${[...bySocket].map(([k, n]) => `${k} ${n}`).join(', ')})`);
    let subs = 0;
    let completed = 0;
    const missing: string[] = [];
    /** Not completed, by the id's index in the round: how many, and how many of them got their `next`. */
    const byId = new Map<number, { open: number; withNext: number }>();
    round.got.forEach((subsOf, c) =>
      subsOf.forEach((g, i) => {
        subs += 1;
        if (g.completes > 0) {
          completed += 1;
          if (g.completes > 1 || g.nexts !== 1)
            missing.push(`connection ${c} s${i}: ${g.nexts} next, ${g.completes} complete`);
          return;
        }
        const n = byId.get(i) ?? { open: 0, withNext: 0 };
        n.open += 1;
        if (g.nexts > 0) n.withNext += 1;
        byId.set(i, n);
        const ws = sockets[c];
        missing.push(
          `connection ${c} s${i} (${round.groups[c]![i]}): ${g.nexts} next, no complete${g.other ? `, ${g.other}` : ''}; socket ${ws ? states[ws.readyState] : 'gone'}`,
        );
      }),
    );
    out.push(`clients: ${completed} of ${subs} subscriptions completed`);
    for (const [i, n] of [...byId].sort((x, y) => x[0] - y[0]))
      out.push(
        `clients: id ${i} (${round.groups[0]?.[i]}): ${n.open} not completed, ${n.withNext} of them with their next`,
      );
    out.push(...missing.slice(0, 40));
    if (missing.length > 40) out.push(`clients: … ${missing.length - 40} more`);
  }
  process.stderr.write(`${out.join('\n')}\n`);
}

/**
 * `script` (the experiment's own file) forked with `--clients`, where it runs `subscriberClients`; `said(word)`
 * resolves at the child's next message `word`.
 */
export function forkSubscriberClients(script: string): { child: ChildProcess; said(word: string): Promise<void> } {
  const child = fork(fileURLToPath(script), ['--clients'], { execArgv: ['--import', 'tsx'] });
  const said = (word: string) =>
    new Promise<void>((resolve) => {
      const on = (m: unknown) => {
        if (m !== word) return;
        child.off('message', on);
        resolve();
      };
      child.on('message', on);
    });
  return { child, said };
}
