/**
 * The kernel's share of a delivery (docs/decisions/062): a minimal `ws` server (no GraphQL, no gateway) writes the frames the
 * gateway writes for one delivery, a graphql-ws `next` with the bench subscription's payload and its `complete`, corked
 * into one write per socket as the gateway does (src/server/ws.ts), to clients in another process. Its CPU per
 * delivery (process.cpuUsage: user and system) is what any server with one WebSocket per subscriber pays at least.
 *
 *   npx tsx bench/experiments/ws-floor.ts [--subscribers 1000] [--events 200]   # fan-out: every event to every subscriber
 *   npx tsx bench/experiments/ws-floor.ts --subscribers 1 --events 20000          # one delivery at a time (single delivery)
 *   npx tsx bench/experiments/ws-floor.ts --frames one   # both frames framed by hand into one buffer per socket, one write
 *   npx tsx bench/experiments/ws-floor.ts --frames one-corked   # the same buffer, each socket corked to the end of the tick
 *   npx tsx bench/experiments/ws-floor.ts --frames one-deferred   # the same buffers kept, each written uncorked at the end of the tick
 *   npx tsx bench/experiments/ws-floor.ts --frames shared   # a header and prefix, the one shared payload, the complete: corked, one writev
 *
 * `--frames ws` (the default) sends both messages through ws (its Sender frames each: a header and the message, two
 * writes each, into the corked socket: one `writev` of four chunks); `--frames one` builds the two frames per
 * delivery into one buffer (the message bytes copied behind their headers) and writes it to the TCP socket once, not
 * corked (`one-corked`: corked, each socket uncorked at the end of the tick, as the gateway did before decision 100);
 * `--frames shared` writes three chunks to each corked socket (the `next`'s header and prefix, the payload bytes shared
 * by every socket, the `complete` frame), so no per-socket copy of the payload: one `writev` at the uncork.
 *
 * The clients run in a child process (this file with --clients), pinned to the driver core when `taskset` is there,
 * the server to the server core. The server writes one event to every socket per turn of its event loop (the corked
 * sockets are uncorked at the end of the tick, as in the gateway), reads nothing meanwhile, and stops the clock when
 * every client has said (one byte, once) that it received every event's `complete`.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { WebSocket, WebSocketServer } from 'ws';

import { pin, placement } from '../lib/processes.js';

const { values: cli } = parseArgs({
  options: {
    subscribers: { type: 'string', default: '1000' },
    events: { type: 'string', default: '200' },
    clients: { type: 'string' },
    frames: { type: 'string', default: 'ws' },
  },
});

const WARM_UP = 50;

/** The payload of the bench subscription's `next` for one success (bench/scenarios/fanout.ts SUBSCRIPTION). */
function frames(id: string): { next: string; complete: string } {
  const payload = {
    data: {
      mobileIdAuthentication: {
        authReqId: '6f1c2b0e-8d1e-4c1a-9f3e-2a5b7c9d0e1f',
        subject: '79001234567',
        correlationId: null,
        receivedAt: '2026-11-27T06:00:00.000Z',
      },
    },
  };
  return { next: JSON.stringify({ id, type: 'next', payload }), complete: JSON.stringify({ id, type: 'complete' }) };
}

async function clients(url: string, count: number, events: number): Promise<void> {
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      (_, i) =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(`${url}?i=${i}`, { perMessageDeflate: false });
          ws.once('open', () => resolve(ws));
          ws.once('error', reject);
          let completes = 0;
          ws.on('message', (data) => {
            if (String(data).includes('"complete"') && ++completes === events) ws.send('d');
          });
        }),
    ),
  );
  process.send!({ ready: sockets.length });
  process.on('message', () => {
    for (const ws of sockets) ws.terminate();
    process.exit(0);
  });
}

async function server(): Promise<void> {
  const place = placement();
  if (place.pinned) pin(process.pid, place.server!);
  const subscribers = Number(cli.subscribers);
  const events = Number(cli.events);
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  await new Promise<void>((r) => wss.once('listening', () => r()));
  const port = (wss.address() as { port: number }).port;
  const raws = new Map<WebSocket, import('node:stream').Duplex>();
  const sockets: WebSocket[] = [];
  wss.on('connection', (ws, req) => {
    sockets.push(ws);
    raws.set(ws, req.socket);
  });
  const child = fork(
    fileURLToPath(import.meta.url),
    ['--clients', `ws://127.0.0.1:${port}`, '--subscribers', String(subscribers), '--events', String(events + WARM_UP)],
    { execArgv: ['--import', 'tsx'] },
  );
  if (place.pinned) pin(child.pid!, place.driver!);
  await new Promise<void>((resolve) => child.once('message', () => resolve()));
  const perSocket = sockets.map((_, i) => frames(`sub-${i}`));
  let finished = 0;
  const allFinished = new Promise<void>((resolve) => {
    for (const ws of sockets) ws.on('message', () => (++finished === subscribers ? resolve() : undefined));
  });
  const header = (length: number): Buffer => {
    const h = Buffer.allocUnsafe(length > 125 ? 4 : 2);
    h[0] = 0x81;
    if (length > 125) {
      h[1] = 126;
      h.writeUInt16BE(length, 2);
    } else h[1] = length;
    return h;
  };
  const bytes = perSocket.map((f) => ({ next: Buffer.from(f.next), complete: Buffer.from(f.complete) }));
  /** `--frames shared`: each socket's `next` header and prefix and its `complete` frame, the payload shared by all. */
  const parts = perSocket.map((f, i) => {
    const text = Buffer.from(f.next);
    const prefixLength = text.indexOf('"payload":') + '"payload":'.length;
    const head = Buffer.concat([header(text.length), text.subarray(0, prefixLength)]);
    const complete = Buffer.concat([header(bytes[i]!.complete.length), bytes[i]!.complete]);
    return { head, payload: Buffer.from(text.subarray(prefixLength)), complete };
  });
  const shared = parts[0]!.payload;
  const send = (): void => {
    if (cli.frames === 'one' || cli.frames === 'one-corked' || cli.frames === 'one-deferred') {
      const corked: import('node:stream').Duplex[] = [];
      const deferred: Array<[import('node:stream').Duplex, Buffer]> = [];
      if (cli.frames === 'one-corked') process.nextTick(() => corked.forEach((raw) => raw.uncork()));
      if (cli.frames === 'one-deferred') process.nextTick(() => deferred.forEach(([raw, out]) => raw.write(out)));
      sockets.forEach((ws, i) => {
        const { next, complete } = bytes[i]!;
        const h1 = next.length > 125 ? 4 : 2;
        const out = Buffer.allocUnsafe(h1 + next.length + 2 + complete.length);
        header(next.length).copy(out, 0);
        next.copy(out, h1);
        header(complete.length).copy(out, h1 + next.length);
        complete.copy(out, h1 + next.length + 2);
        const raw = raws.get(ws)!;
        if (cli.frames === 'one-deferred') {
          deferred.push([raw, out]);
          return;
        }
        if (cli.frames === 'one-corked') {
          raw.cork();
          corked.push(raw);
        }
        raw.write(out);
      });
      return;
    }
    if (cli.frames === 'shared') {
      const corked: import('node:stream').Duplex[] = [];
      process.nextTick(() => corked.forEach((raw) => raw.uncork()));
      sockets.forEach((ws, i) => {
        const raw = raws.get(ws)!;
        raw.cork();
        corked.push(raw);
        raw.write(parts[i]!.head);
        raw.write(shared);
        raw.write(parts[i]!.complete);
      });
      return;
    }
    sockets.forEach((ws, i) => {
      const raw = raws.get(ws)!;
      raw.cork();
      ws.send(perSocket[i]!.next);
      ws.send(perSocket[i]!.complete);
      process.nextTick(() => raw.uncork());
    });
  };
  const turn = () => new Promise<void>((r) => setImmediate(r));
  for (let i = 0; i < WARM_UP; i++) {
    send();
    await turn();
  }
  await new Promise((r) => setTimeout(r, 500));
  const before = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < events; i++) {
    send();
    await turn();
  }
  await allFinished;
  const used = process.cpuUsage(before);
  const seconds = (performance.now() - t0) / 1000;
  const deliveries = events * subscribers;
  process.stdout.write(
    `ws floor: ${subscribers} subscriber(s), ${events} events, ${deliveries} deliveries in ${seconds.toFixed(2)} s (${Math.round(deliveries / seconds)}/s); ` +
      `frames ${cli.frames}: server CPU per delivery ${((used.user + used.system) / deliveries).toFixed(2)} µs (user ${(used.user / deliveries).toFixed(2)}, system ${(used.system / deliveries).toFixed(2)}); ${place.description}\n`,
  );
  child.send('stop');
  wss.close();
}

if (cli.clients) void clients(cli.clients, Number(cli.subscribers), Number(cli.events));
else void server();
