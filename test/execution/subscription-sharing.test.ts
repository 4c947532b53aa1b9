import { randomUUID } from 'node:crypto';
import { createClient as createSseClient, type Client as SseClient } from 'graphql-sse';
import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe, type Subscription } from '../helpers/identity.js';
import { postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

/**
 * Fan-out (docs/decisions/030): the subscribers of one event whose execution would be identical (same
 * document, variables and API key) share one execution of the selection, counted by /metrics; subscribers of
 * other documents, variables or apps get their own execution and their own correct result, and an app's own
 * event never reaches another app through the sharing. Real gateway, real WebSockets (one per subscriber).
 */
const A = 'key-app-a';
const B = 'key-app-b';

const FAILED_ONLY = `subscription($id: String!) { mobileIdAuthentication(authReqId: $id) { ... on MobileIdAuthenticationFailed { reason authReqId } } }`;
const WITH_FLAG = `subscription($id: String!, $withReason: Boolean!) {
  mobileIdAuthentication(authReqId: $id) { __typename ... on MobileIdAuthenticationFailed { authReqId reason @include(if: $withReason) } }
}`;
const COMPLETE_MOBILE_ID = `mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id, outcome: CANCELLED_BY_USER) { accepted httpStatus } }`;

describe('identical subscriptions share one execution per event', () => {
  let t: TestGateway;
  const clients: Client[] = [];
  const sseClients: SseClient[] = [];
  const subs: Subscription[] = [];

  /** One subscriber on its own WebSocket. */
  const subscriber = (key: string, query: string, variables: Record<string, unknown>): Subscription => {
    const c = wsClient(t, { key });
    clients.push(c);
    const s = subscribe(c, query, variables);
    subs.push(s);
    return s;
  };
  const listeners = (authReqId: string) => subscribers(t, 'mobile-id', authReqId);
  const counts = async () => {
    const text = await (await request(`${t.url}/metrics`)).body.text();
    const read = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
    return {
      executions: read('gateway_subscription_executions_total'),
      shared: read('gateway_subscription_results_shared_total'),
    };
  };
  /** A failure notification on the operator's configured token (scope null: every app may read it). */
  const notifyForEveryone = async (authReqId: string) => {
    const n = await t.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CANCELLED_BY_USER' });
    expect((await postNotification(t, n.body, { headers: n.headers })).status).toBe(204);
  };

  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: `${A},${B}` });
  });
  afterEach(async () => {
    for (const s of subs.splice(0)) s.stop();
    for (const c of sseClients.splice(0)) c.dispose();
    await Promise.all(clients.splice(0).map((c) => c.dispose()));
  });
  afterAll(async () => {
    await t.close();
  });

  it('20 subscribers of one event with the same document, variables and API key cause exactly one execution, and all get the same result', async () => {
    const id = `req-${randomUUID()}`;
    const all = Array.from({ length: 20 }, () => subscriber(A, SUBSCRIPTION, { id }));
    await waitFor(() => listeners(id) === 20);
    const before = await counts();

    await notifyForEveryone(id);
    await waitFor(() => all.every((s) => s.completed), 20_000, 'every subscriber completed');

    const after = await counts();
    expect(after.executions - before.executions).toBe(1);
    expect(after.shared - before.shared).toBe(19);
    for (const s of all) {
      expect(s.errors).toEqual([]);
      expect(s.received).toHaveLength(1);
      expect(s.received[0]).toEqual(all[0]!.received[0]);
    }
    expect(all[0]!.received[0].mobileIdAuthentication).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      authReqId: id,
      error: 'access_denied',
      reason: 'CANCELLED_BY_USER',
    });
  });

  it('subscribers of other apps, documents or variables get their own execution and their own correct result', async () => {
    const id = `req-${randomUUID()}`;
    const groups = {
      aFull: [
        subscriber(A, SUBSCRIPTION, { id }),
        subscriber(A, SUBSCRIPTION, { id }),
        subscriber(A, SUBSCRIPTION, { id }),
      ],
      bFull: [subscriber(B, SUBSCRIPTION, { id }), subscriber(B, SUBSCRIPTION, { id })],
      aFailedOnly: [subscriber(A, FAILED_ONLY, { id }), subscriber(A, FAILED_ONLY, { id })],
      aWithReason: [
        subscriber(A, WITH_FLAG, { id, withReason: true }),
        subscriber(A, WITH_FLAG, { id, withReason: true }),
      ],
      aWithoutReason: [subscriber(A, WITH_FLAG, { id, withReason: false })],
    };
    const every = Object.values(groups).flat();
    await waitFor(() => listeners(id) === every.length);
    const before = await counts();

    await notifyForEveryone(id);
    await waitFor(() => every.every((s) => s.completed), 20_000, 'every subscriber completed');

    const after = await counts();
    expect(after.executions - before.executions).toBe(5);
    expect(after.shared - before.shared).toBe(every.length - 5);
    for (const s of every) {
      expect(s.errors).toEqual([]);
      expect(s.received).toHaveLength(1);
    }
    const full = (s: Subscription) => s.received[0].mobileIdAuthentication;
    for (const s of [...groups.aFull, ...groups.bFull]) {
      expect(full(s)).toMatchObject({
        __typename: 'MobileIdAuthenticationFailed',
        authReqId: id,
        reason: 'CANCELLED_BY_USER',
        error: 'access_denied',
      });
      expect(full(s)).toEqual(full(groups.aFull[0]!));
    }
    for (const s of groups.aFailedOnly) expect(full(s)).toEqual({ reason: 'CANCELLED_BY_USER', authReqId: id });
    for (const s of groups.aWithReason)
      expect(full(s)).toEqual({
        __typename: 'MobileIdAuthenticationFailed',
        authReqId: id,
        reason: 'CANCELLED_BY_USER',
      });
    for (const s of groups.aWithoutReason)
      expect(full(s)).toEqual({ __typename: 'MobileIdAuthenticationFailed', authReqId: id });
  });

  it("an app's own event reaches only that app's subscribers, although another app subscribed with the same document", async () => {
    const id = `req-${randomUUID()}`;
    const mine = [
      subscriber(A, SUBSCRIPTION, { id }),
      subscriber(A, SUBSCRIPTION, { id }),
      subscriber(A, SUBSCRIPTION, { id }),
    ];
    const theirs = [subscriber(B, SUBSCRIPTION, { id }), subscriber(B, SUBSCRIPTION, { id })];
    await waitFor(() => listeners(id) === 5);
    const before = await counts();

    // The sandbox notifies on a token issued for A: the event is A's alone (src/auth/tenancy.ts).
    const done = await t.graphql(COMPLETE_MOBILE_ID, { id }, { key: A });
    expect(done.data!.sandboxCompleteMobileIdAuthentication).toMatchObject({ accepted: true, httpStatus: 204 });
    await waitFor(() => mine.every((s) => s.completed), 20_000, "the owner's subscribers completed");

    const after = await counts();
    expect(after.executions - before.executions).toBe(1);
    expect(after.shared - before.shared).toBe(2);
    for (const s of mine)
      expect(s.received).toEqual([
        { mobileIdAuthentication: expect.objectContaining({ authReqId: id, reason: 'CANCELLED_BY_USER' }) },
      ]);
    // B's subscribers still wait, as for an id with no result: nothing received, no error, not completed.
    expect(listeners(id)).toBe(2);
    for (const s of theirs) {
      expect(s.received).toEqual([]);
      expect(s.errors).toEqual([]);
      expect(s.completed).toBe(false);
    }
  });

  it('a late subscriber, whose stored event is read for it alone, executes on its own and gets the same result', async () => {
    const id = `req-${randomUUID()}`;
    await notifyForEveryone(id);
    const before = await counts();
    const late = [subscriber(A, SUBSCRIPTION, { id }), subscriber(A, SUBSCRIPTION, { id })];
    await waitFor(() => late.every((s) => s.completed), 20_000, 'the late subscribers completed');
    const after = await counts();
    // Each read of the log yields its own record: nothing is shared that was not the same event object.
    expect(after.executions - before.executions).toBe(2);
    expect(late[0]!.received).toEqual(late[1]!.received);
    expect(late[0]!.received[0].mobileIdAuthentication).toMatchObject({ authReqId: id, reason: 'CANCELLED_BY_USER' });
  });

  it('subscribers over SSE and WebSocket share the execution, and a success (sealed tokens) is opened once for all of them', async () => {
    const id = `req-${randomUUID()}`;
    const ws = [subscriber(A, SUBSCRIPTION, { id }), subscriber(A, SUBSCRIPTION, { id })];
    const sse: Array<{ results: any[]; completed: boolean }> = [];
    for (let i = 0; i < 2; i++) {
      const client = createSseClient({
        url: `${t.url}/graphql/stream`,
        headers: { authorization: `Bearer ${A}` },
        retryAttempts: 0,
      });
      sseClients.push(client);
      const got = { results: [] as any[], completed: false };
      client.subscribe(
        { query: SUBSCRIPTION, variables: { id } },
        { next: (v) => got.results.push(v), error: () => undefined, complete: () => (got.completed = true) },
      );
      sse.push(got);
    }
    await waitFor(() => listeners(id) === 4);
    const before = await counts();

    const n = await t.gateway.sandbox.mobileId!.buildNotification({ authReqId: id });
    expect((await postNotification(t, n.body, { headers: n.headers })).status).toBe(204);
    await waitFor(
      () => ws.every((s) => s.completed) && sse.every((s) => s.completed),
      20_000,
      'every subscriber completed',
    );

    const after = await counts();
    expect(after.executions - before.executions).toBe(1);
    expect(after.shared - before.shared).toBe(3);
    const expected = {
      __typename: 'MobileIdAuthenticated',
      authReqId: id,
      accessToken: n.body.access_token,
      idToken: n.body.id_token,
    };
    for (const s of ws) expect(s.received).toEqual([{ mobileIdAuthentication: expect.objectContaining(expected) }]);
    // Each result carries the event's position in the log, the same for every subscriber of the event.
    for (const s of sse)
      expect(s.results).toEqual([
        {
          data: { mobileIdAuthentication: expect.objectContaining(expected) },
          extensions: { cursor: expect.stringMatching(/^[A-Za-z0-9_-]+$/) },
        },
      ]);
  });

  it('writes the graphql-transport-ws messages graphql-ws would: next with the shared payload, then complete, each as its own message', async () => {
    const id = `req-${randomUUID()}`;
    const sockets = [0, 1].map(() => new WebSocket(`${t.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws'));
    const texts: string[][] = [[], []];
    await Promise.all(
      sockets.map(
        (socket, i) =>
          new Promise<void>((resolve, reject) => {
            socket.on('error', reject);
            socket.on('message', (data) => {
              const text = String(data);
              texts[i]!.push(text);
              if (JSON.parse(text).type === 'connection_ack') {
                socket.send(
                  JSON.stringify({
                    id: `op-${i}`,
                    type: 'subscribe',
                    payload: { query: SUBSCRIPTION, variables: { id } },
                  }),
                );
                resolve();
              }
            });
            socket.on('open', () =>
              socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${A}` } })),
            );
          }),
      ),
    );
    await waitFor(() => listeners(id) === 2);
    await notifyForEveryone(id);
    await waitFor(() => texts.every((t) => t.length === 3));
    for (const [i, [ack, next, complete]] of texts.entries()) {
      expect(JSON.parse(ack!)).toEqual({ type: 'connection_ack' });
      const message = JSON.parse(next!);
      expect(message).toEqual({
        id: `op-${i}`,
        type: 'next',
        payload: {
          data: { mobileIdAuthentication: expect.objectContaining({ authReqId: id, reason: 'CANCELLED_BY_USER' }) },
          extensions: { cursor: expect.stringMatching(/^[A-Za-z0-9_-]+$/) },
        },
      });
      // Byte for byte what graphql-ws writes: JSON.stringify({ id, type, payload }).
      expect(next).toBe(JSON.stringify({ id: `op-${i}`, type: 'next', payload: message.payload }));
      expect(JSON.parse(complete!)).toEqual({ id: `op-${i}`, type: 'complete' });
    }
    expect(JSON.parse(texts[0]![1]!).payload).toEqual(JSON.parse(texts[1]![1]!).payload);
    for (const socket of sockets) socket.close();
  });
});
