import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';

let gw: TestGateway;
const clients: Client[] = [];
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: 'good-key' });
});
afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.dispose()));
  await gw?.close();
});

function client(options: Parameters<typeof wsClient>[1]): Client {
  const c = wsClient(gw, options);
  clients.push(c);
  return c;
}

async function sandboxResult(id: string): Promise<void> {
  const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: id, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(gw, n.body)).status).toBe(204);
}

describe('subscriptions over graphql-ws authenticate like HTTP', () => {
  it('closes the socket with 4401 when no API key is sent', async () => {
    const sub = collect(client({}), SUBSCRIPTION, { id: 'x' });
    await sub.done;
    expect((sub.errors[0] as { code: number }).code).toBe(4401);
  });

  it('closes the socket with 4403 for a wrong API key, in connectionParams or in the upgrade header', async () => {
    for (const keyIn of ['params', 'header'] as const) {
      const sub = collect(client({ key: 'bad-key', keyIn }), SUBSCRIPTION, { id: 'x' });
      await sub.done;
      expect((sub.errors[0] as { code: number }).code, keyIn).toBe(4403);
    }
  });

  it('accepts the key in connectionParams.authorization or in the upgrade request Authorization header', async () => {
    await sandboxResult('ws-auth');
    for (const keyIn of ['params', 'header'] as const) {
      const sub = collect(client({ key: 'good-key', keyIn }), SUBSCRIPTION, { id: 'ws-auth' });
      await sub.done;
      expect(sub.errors, keyIn).toEqual([]);
      expect(sub.results[0].data.mobileIdAuthentication.reason).toBe('CLIENT_TIMEOUT');
    }
  });

  it('speaks graphql-transport-ws on the /graphql path of the HTTP port', async () => {
    const ws = new WebSocket(gw.url.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws');
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    expect(ws.protocol).toBe('graphql-transport-ws');
    ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: 'Bearer good-key' } }));
    const ack = await new Promise<string>((resolve) => ws.once('message', (m) => resolve(String(m))));
    expect(JSON.parse(ack)).toEqual({ type: 'connection_ack' });
    ws.close();
  });
});
