// What arrives while the gateway drains (docs/operations.md, Shutdown): a request that was on its way when the
// shutdown began is served, and what it opens is ended with the rest, never left for the drain's deadline to cut.
import http from 'node:http';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { startTestGateway } from '../helpers/gateway.js';

/** A body read to its end: 'ended' when the server ended it, or what cut it. */
function readToEnd(body: AsyncIterable<Uint8Array>, seen: (text: string) => void = () => undefined): Promise<string> {
  return (async () => {
    let text = '';
    try {
      for await (const chunk of body) {
        text += Buffer.from(chunk).toString('utf8');
        seen(text);
      }
      return 'ended';
    } catch (err) {
      return `cut: ${(err as Error).message}`;
    }
  })();
}

const TICKS = JSON.stringify({ query: 'subscription { heartbeat(intervalMs: 1000, count: 1000) }' });

describe('a request that arrives as the gateway drains', () => {
  it('an SSE subscription whose body was still arriving when the shutdown began is ended, not held to the cut', async () => {
    const gw = await startTestGateway();
    // A stream open before the shutdown: its end says that the route has ended the streams it held.
    const before = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: TICKS,
    });
    expect(before.statusCode).toBe(200);
    let ticked!: () => void;
    const tick = new Promise<void>((resolve) => (ticked = resolve));
    const beforeEnded = readToEnd(before.body, (text) => text.includes('event: next') && ticked());
    await tick;

    // A second one whose body is half sent: in flight (the server has its request) as the shutdown begins.
    const arrived = new Promise<void>((resolve) =>
      gw.gateway.server.on('request', (req: http.IncomingMessage) => req.url === '/graphql/stream' && resolve()),
    );
    const half = Math.floor(TICKS.length / 2);
    const late = http.request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      agent: false,
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'content-length': String(Buffer.byteLength(TICKS)),
      },
    });
    const lateEnded = new Promise<{ how: string; status: number | undefined; text: string }>((resolve) => {
      late.on('error', (err) => resolve({ how: `cut: ${err.message}`, status: undefined, text: '' }));
      late.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ how: 'ended', status: res.statusCode, text }));
        res.on('aborted', () => resolve({ how: 'cut', status: res.statusCode, text }));
        res.on('error', () => resolve({ how: 'cut', status: res.statusCode, text }));
      });
    });
    late.write(TICKS.slice(0, half));
    await arrived;

    const closed = gw.close();
    expect(await beforeEnded).toBe('ended');
    // The rest of the body comes after the route ended its streams: the stream it opens must end as they did.
    late.end(TICKS.slice(half));
    const outcome = await lateEnded;
    expect(outcome.how).toBe('ended');
    expect(outcome.status).toBe(200);
    await closed;
  });
});
