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

/** The experiments' gateway environment: `env` over the defaults above, on a fresh data directory named `prefix-…`. */
function experimentEnv(prefix: string, env: Record<string, string>): Record<string, string> {
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

/**
 * The subscribers' side of an experiment, for a child process: on the parent's word `{ url, groups }` it opens one
 * graphql-ws connection per group and subscribes on it once per id of the group (to that id's mobile-ID outcome),
 * says `ready` when every connection has its subscriptions, and `done` when every subscription completed (then
 * `{ arrivals }`: when each `next` arrived, by the index of its id); on `close` it closes them all and says `closed`.
 */
export function subscriberClients(): void {
  let sockets: WebSocket[] = [];
  process.on('message', async (m: { url: string; groups: string[][] } | 'close') => {
    if (m === 'close') {
      await Promise.all(sockets.map((ws) => new Promise<void>((r) => (ws.once('close', () => r()), ws.close()))));
      sockets = [];
      process.send!('closed');
      return;
    }
    let completes = 0;
    const want = m.groups.reduce((n, ids) => n + ids.length, 0);
    /** When each `next` arrived (ms since the epoch, this machine's clock), by the index of its id in the group. */
    const arrivals: number[][] = [];
    sockets = await Promise.all(
      m.groups.map(
        (ids) =>
          new Promise<WebSocket>((resolve, reject) => {
            const ws: WebSocket = clientSocket(
              m.url,
              () => {
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
              (text) => {
                if (!text.startsWith('{"id":"s')) return;
                if (text.includes('"type":"next"')) {
                  const i = Number(text.slice(8, text.indexOf('"', 8)));
                  (arrivals[i] ??= []).push(performance.timeOrigin + performance.now());
                }
                if (text.includes('"type":"complete"') && ++completes === want) {
                  process.send!('done');
                  process.send!({ arrivals });
                }
              },
              reject,
            );
          }),
      ),
    );
    process.send!('ready');
  });
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
