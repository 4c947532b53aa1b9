/**
 * The peer scenarios 5 and 7 of `npm run bench` measure beside the gateway (bench/peers/hive-webhooks.ts),
 * checked cheaply so that a broken setup fails `npm test` and not only the benchmark: Hive Gateway with
 * `webhooks: true`, the in-memory pubsub and a `@resolveTo(pubsubTopic, filterBy)` subscription field turns a
 * POST on the mobile-ID webhook path into an event for the subscriber of that auth_req_id, with the fields
 * the load generator reads (through the aliases of HIVE_MOBILE_ID_SUBSCRIPTION).
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { startHiveWebhookPeer } from '../../bench/peers/hive-webhooks.js';
import type { RunningPeer } from '../../bench/peers/hive.js';
import { HIVE_MOBILE_ID_SUBSCRIPTION } from '../../bench/peers/requests.js';
import { WEBHOOK_PATH } from '../../bench/scenarios/webhook.js';

let peer: RunningPeer;

beforeAll(async () => {
  peer = await startHiveWebhookPeer();
});
afterAll(async () => {
  await peer?.close();
});

async function webhook(authReqId: string, correlationId: string): Promise<number> {
  const res = await request(`${new URL(peer.url).origin}${WEBHOOK_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      auth_req_id: authReqId,
      error: 'access_denied',
      error_description: 'client timeout',
      correlation_id: correlationId,
    }),
  });
  await res.body.dump();
  return res.statusCode;
}

describe("Hive Gateway's webhook peer (bench scenarios 5 and 7)", () => {
  it('delivers a notification to the subscriber of its auth_req_id and filters out notifications for other ids', async () => {
    const ws = new WebSocket(peer.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    const messages: Array<{ type: string; id?: string; payload?: unknown }> = [];
    let onMessage = () => {};
    ws.on('message', (raw) => {
      messages.push(JSON.parse(String(raw)) as { type: string });
      onMessage();
    });
    const next = (pred: (m: (typeof messages)[number]) => boolean) =>
      new Promise<(typeof messages)[number]>((resolve) => {
        const check = () => {
          const m = messages.find(pred);
          if (m) resolve(m);
        };
        onMessage = check;
        check();
      });
    try {
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      ws.send(JSON.stringify({ type: 'connection_init', payload: {} }));
      await next((m) => m.type === 'connection_ack');
      ws.send(
        JSON.stringify({
          id: 's1',
          type: 'subscribe',
          payload: { query: HIVE_MOBILE_ID_SUBSCRIPTION, variables: { authReqId: 'mine' } },
        }),
      );
      // The webhook path answers 404 until a subscription holds its topic (the plugin serves only subscribed
      // topics); the only subscription is ours, so the first 204 means it is set up, and that notification,
      // for another id, reached it and had to be filtered out.
      while ((await webhook('someone-else', 'other')) === 404);
      expect(await webhook('mine', '1764000000000.123')).toBe(204);
      const event = await next((m) => m.type === 'next' && m.id === 's1');
      expect(event.payload).toEqual({
        data: {
          mobileIdNotification: { authReqId: 'mine', correlationId: '1764000000000.123', error: 'access_denied' },
        },
      });
      expect(messages.filter((m) => m.type === 'next')).toHaveLength(1);
    } finally {
      ws.terminate();
    }
  });
});
