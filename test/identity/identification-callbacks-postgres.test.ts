import { createClient } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { IDENTIFICATION_EVENT_KIND } from '../../src/identity/completions.js';
import type { TestGateway } from '../helpers/gateway.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';
import { waitForSubscribers } from '../helpers/wait.js';

async function post(url: string, body: unknown): Promise<number> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.body.dump();
  return res.statusCode;
}

describe('identification callbacks on PostgreSQL replicas', () => {
  let replicas: Replicas | undefined;
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    replicas = await startReplicas('identification_callbacks', {
      GATEWAY_API_KEYS: 'key-a',
      PUBLIC_URL: 'https://gateway.example',
    });
    ({ a, b } = replicas);
  }, 120_000);
  afterAll(() => replicas?.close());

  it('shows the same address on every replica, and a callback that reaches replica B is stored once and streamed to a subscriber on replica A', async () => {
    const created = await a.graphql(
      `mutation { createIdentification(input: { workflowId: "wf-replicas" }) { identification { id callbackUrl } } }`,
      {},
      { key: 'key-a' },
    );
    expect(created.errors).toBeUndefined();
    const { id, callbackUrl } = created.data!.createIdentification.identification as {
      id: string;
      callbackUrl: string;
    };
    const onB = await b.graphql(`{ identificationCallbackUrl(workflowId: "wf-replicas") }`, {}, { key: 'key-a' });
    expect(onB.data!.identificationCallbackUrl).toBe(callbackUrl);
    expect(callbackUrl.startsWith('https://gateway.example/webhooks/identification/')).toBe(true);
    const path = new URL(callbackUrl).pathname;

    const client = createClient({
      url: a.url.replace('http', 'ws') + '/graphql',
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: 'Bearer key-a' },
    });
    try {
      const received: Array<{ id: string; status: string }> = [];
      client.subscribe<{ identificationCompleted: { id: string; status: string } }>(
        { query: `subscription { identificationCompleted { id status } }` },
        {
          next: (m) => received.push(m.data!.identificationCompleted),
          error: () => undefined,
          complete: () => undefined,
        },
      );
      // A's subscription is registered before B publishes (a late one streams only new events)
      await waitForSubscribers(a, IDENTIFICATION_EVENT_KIND);
      expect(await post(`${b.url}${path}`, { id, status: 'COMPLETED' })).toBe(204);
      expect(await post(`${a.url}${path}`, { id, status: 'COMPLETED' })).toBe(204);
      await expect.poll(() => received.length, { timeout: 20_000 }).toBe(1);
      // A distinct later callback, through B again, is the marker: a second copy of the first would come before it.
      expect(await post(`${b.url}${path}`, { id, status: 'ARCHIVED' })).toBe(204);
      await expect.poll(() => received.length, { timeout: 20_000 }).toBe(2);
      expect(received).toEqual([
        { id, status: 'COMPLETED' },
        { id, status: 'ARCHIVED' },
      ]);
    } finally {
      await client.dispose();
    }
    const read = await b.graphql(`query($id: ID!) { identification(id: $id) { status } }`, { id }, { key: 'key-a' });
    expect(read.data!.identification).toEqual({ status: 'ARCHIVED' });
  });
});
