import { afterEach, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY = 'keep-alive-key';

/** A graphql-ws connection, acknowledged; `autoPong: false` is a peer that never answers a ping (a dead one). */
async function connect(gw: TestGateway, autoPong = true) {
  const ws = new WebSocket(gw.url.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws', { autoPong });
  const messages: string[] = [];
  let pings = 0;
  ws.on('ping', () => pings++);
  ws.on('message', (data) => messages.push(String(data)));
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const next = (prefix: string) =>
    new Promise<void>((resolve) => {
      const on = (data: WebSocket.RawData) => {
        if (!String(data).startsWith(prefix)) return;
        ws.off('message', on);
        resolve();
      };
      ws.on('message', on);
    });
  const acked = next('{"type":"connection_ack"');
  ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${KEY}` } }));
  await acked;
  return {
    ws,
    closed,
    pings: () => pings,
    /** The next WebSocket ping from the gateway. */
    pinged: () => new Promise<void>((resolve) => ws.once('ping', () => resolve())),
    /**
     * A graphql-ws ping and the gateway's pong: the gateway has read everything this peer sent before (its pongs
     * included), and every frame the gateway wrote to it before the pong (a WebSocket ping included) has arrived.
     */
    roundTrip: async () => {
      const pong = next('{"type":"pong"');
      ws.send('{"type":"ping"}');
      await pong;
    },
  };
}

let gw: TestGateway | undefined;
afterEach(async () => {
  vi.useRealTimers();
  await gw?.close();
  gw = undefined;
});

describe.each([
  { sweep: true, activePings: 0 },
  { sweep: false, activePings: 2 },
])('the WebSocket keep-alive with WS_KEEP_ALIVE_SWEEP=$sweep', ({ sweep, activePings }) => {
  it(`pings a quiet live connection every 12 s, ${sweep ? 'never one that sends' : 'and one that sends'}, and closes a dead one within 24 s`, async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: KEY, WS_KEEP_ALIVE_SWEEP: String(sweep) });
    // The keep-alive's timers are made when connections open: from here on the test's clock governs them.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
    const quiet = await connect(gw);
    const active = await connect(gw);
    const dead = await connect(gw, false);
    let deadClosed = false;
    void dead.closed.then(() => (deadClosed = true));

    await vi.advanceTimersByTimeAsync(6_000);
    await active.roundTrip();
    const quietPinged = quiet.pinged();
    const deadPinged = dead.pinged();
    await vi.advanceTimersByTimeAsync(6_000);
    // 12 s after opening: the quiet and the dead connection are pinged.
    await Promise.all([quietPinged, deadPinged]);
    await Promise.all([quiet.roundTrip(), active.roundTrip()]);
    expect([quiet.pings(), active.pings(), dead.pings()]).toEqual([1, activePings / 2, 1]);

    await vi.advanceTimersByTimeAsync(6_000);
    await active.roundTrip();
    expect(deadClosed).toBe(false);
    const quietPingedAgain = quiet.pinged();
    await vi.advanceTimersByTimeAsync(6_000);
    // 24 s: the quiet connection's second ping; the dead one, silent for 12 s since its ping, is terminated.
    await quietPingedAgain;
    expect(await dead.closed).toBe(1006);
    await active.roundTrip();
    expect([quiet.pings(), active.pings()]).toEqual([2, activePings]);
    expect(quiet.ws.readyState).toBe(WebSocket.OPEN);
    expect(active.ws.readyState).toBe(WebSocket.OPEN);
    for (const c of [quiet, active]) c.ws.terminate();
  });
});
