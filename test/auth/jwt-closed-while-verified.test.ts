// A graphql-ws connection whose client leaves while its JWT is verified (the verification awaiting the identity
// provider's keys): nothing is held or scheduled for it once the verification ends, since its close has run already
// and nothing would release or cancel it later.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';

import type { TestGateway } from '../helpers/gateway.js';
import {
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  testClock,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';
import { waitFor } from '../helpers/wait.js';

describe('a graphql-ws client that leaves while its JWT is verified', () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;
  const scheduled: Array<{ cancelled: boolean }> = [];
  const clock = testClock();

  beforeAll(async () => {
    key = await signingKey('key-1');
    jwks = await startJwksServer([key]);
    // The provider is down as the gateway starts: its first fetch of the keys fails, so that the test's token is
    // what asks for them (below), after the clock passed the refresh interval.
    jwks.down();
    t = await startJwtGateway(
      jwks,
      {},
      {
        testing: {
          clock: clock.now,
          scheduleAuthExpiry: () => {
            const entry = { cancelled: false };
            scheduled.push(entry);
            return () => (entry.cancelled = true);
          },
        },
      },
    );
    await waitFor(() => t.logs().includes('could not be fetched'), 20_000, 'the first fetch of the keys failing');
    jwks.up();
  });
  afterAll(async () => {
    jwks.release();
    await t?.close();
    await jwks?.stop();
  });

  it('leaves no expiry scheduled, and the same token admitted later is scheduled and cancelled as usual', async () => {
    const token = await sign(key);
    jwks.hold();
    // Past the refresh interval: the token's verification fetches the keys itself, and waits for them.
    clock.advance(10 * 60_000);
    const before = jwks.requests;
    const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } }));
    await waitFor(() => jwks.requests > before, 20_000, 'the verification asking for the keys');
    // The client's close completes once the gateway answered its close frame: the gateway's socket is closing by then.
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.close(1000);
    expect(await closed).toBe(1000);
    jwks.release();
    // The verification ends now; a second connection with the same token, admitted, shows it has.
    const again = new WebSocket(`${t.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    const acked = new Promise<void>((resolve, reject) => {
      again.on('message', (data) => {
        if (String(data).includes('connection_ack')) resolve();
      });
      again.once('error', reject);
    });
    again.once('open', () =>
      again.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } })),
    );
    await acked;
    // Only the admitted connection's expiry is scheduled; it is cancelled when that connection closes.
    expect(scheduled).toEqual([{ cancelled: false }]);
    const againClosed = new Promise<void>((resolve) => again.once('close', () => resolve()));
    again.close(1000);
    await againClosed;
    await waitFor(() => scheduled[0]!.cancelled, 20_000, 'the admitted connection’s expiry cancelled at its close');
  });
});
