import { randomUUID } from 'node:crypto';
import { queryObjects } from 'node:v8';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';

import { SharedResultStream } from '../../src/execution/run.js';
import { Group } from '../../src/execution/shared.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification, SUBSCRIPTION } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

// DELIVERY_COMPLETE_WITH_LAST (docs/decisions/089): a subscription whose event stream ends with the event just delivered
// gets its `next` and `complete` written together, and its event stream is not asked again. The frames are compared
// byte for byte with the plain path in test/server/delivery-shortcuts.test.ts; here, what else an app could see on the
// same connection: the id reused at once after its `complete`, and no second `complete`, with the switch on and off.

const KEY = 'app-key-complete';

/** One graphql-ws connection that records every frame after connection_ack (pings aside) as text. */
async function connection(gw: TestGateway) {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
    headers: { authorization: `Bearer ${KEY}` },
  });
  const frames: string[] = [];
  const closed: number[] = [];
  let onFrame: ((frame: { id?: string; type: string }) => void) | null = null;
  await new Promise<void>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('close', (code) => closed.push(code));
    ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    ws.on('message', (data: Buffer) => {
      const text = data.toString('utf8');
      const msg = JSON.parse(text) as { id?: string; type: string };
      if (msg.type === 'connection_ack') return resolve();
      if (msg.type === 'ping') return;
      frames.push(text);
      onFrame?.(msg);
    });
  });
  return {
    frames,
    closed,
    subscribe: (id: string, authReqId: string) =>
      ws.send(
        JSON.stringify({ id, type: 'subscribe', payload: { query: SUBSCRIPTION, variables: { id: authReqId } } }),
      ),
    /** graphql-ws's `complete` from the client: the subscription `id` ends. */
    complete: (id: string) => ws.send(JSON.stringify({ id, type: 'complete' })),
    /** Called with every frame as it arrives (synchronously, before any other I/O of the client). */
    onFrame: (f: typeof onFrame) => (onFrame = f),
    close: () => ws.close(),
  };
}

/** A failure notification for `authReqId` from the sandbox's operator (readable by every app). */
async function notify(gw: TestGateway, authReqId: string): Promise<void> {
  const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CANCELLED_BY_USER' });
  expect((await postNotification(gw, n.body, { headers: n.headers })).status).toBe(204);
}

describe.each([
  ['on', 'true', 1],
  ['off', 'false', 2],
] as const)('DELIVERY_COMPLETE_WITH_LAST %s', (_name, value, nextCalls) => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: KEY, DELIVERY_COMPLETE_WITH_LAST: value });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('a subscription ended by its one result gets `next` then `complete`, once each; the event stream is asked again only with the switch off', async () => {
    const c = await connection(gw);
    const id = `req-${randomUUID()}`;
    c.subscribe('op-1', id);
    await waitFor(() => subscribers(gw, 'mobile-id', id) === 1, 20_000, 'the subscription listening');
    // Every event stream of the gateway is an EventStream; only this test's subscription is open now.
    const stream = Object.getPrototypeOf(gw.gateway.services.events.streams.subscribe({ kind: 'none' })) as {
      nextTo: () => unknown;
    };
    // graphql-ws's results are written by their sink: the subscription asks its stream with `nextTo` (it is the waiter).
    const next = vi.spyOn(stream, 'nextTo');
    try {
      await notify(gw, id);
      await waitFor(() => c.frames.length === 2, 20_000, 'next and complete');
      // The first next() was waiting before the spy; the second one, after the result, only with the switch off.
      expect(next).toHaveBeenCalledTimes(nextCalls - 1);
    } finally {
      next.mockRestore();
    }
    expect(c.frames.map((f) => JSON.parse(f) as { id: string; type: string }).map((f) => [f.id, f.type])).toEqual([
      ['op-1', 'next'],
      ['op-1', 'complete'],
    ]);
    expect(c.frames[1]).toBe('{"id":"op-1","type":"complete"}');
    // Nothing more arrives on the connection: a third frame would be a second `complete`.
    const later = `req-${randomUUID()}`;
    c.subscribe('op-2', later);
    await waitFor(() => subscribers(gw, 'mobile-id', later) === 1, 20_000, 'the second subscription listening');
    await notify(gw, later);
    await waitFor(() => c.frames.length === 4, 20_000, 'the second subscription ended');
    expect(c.frames.slice(2).map((f) => (JSON.parse(f) as { id: string; type: string }).id)).toEqual(['op-2', 'op-2']);
    expect(c.closed).toEqual([]);
    c.close();
  });

  it('an app that reuses the id as soon as its `complete` arrives gets a new subscription under it, not 4409', async () => {
    const c = await connection(gw);
    const first = `req-${randomUUID()}`;
    const second = `req-${randomUUID()}`;
    c.onFrame((f) => {
      if (f.type === 'complete' && c.frames.length === 2) c.subscribe('op-1', second);
    });
    c.subscribe('op-1', first);
    await waitFor(() => subscribers(gw, 'mobile-id', first) === 1, 20_000, 'the first subscription listening');
    await notify(gw, first);
    await waitFor(() => subscribers(gw, 'mobile-id', second) === 1, 20_000, 'the id reused');
    await notify(gw, second);
    await waitFor(() => c.frames.length === 4, 20_000, 'the second subscription ended');
    const got = c.frames.map((f) => JSON.parse(f) as { id: string; type: string; payload?: any });
    expect(got.map((f) => [f.id, f.type])).toEqual([
      ['op-1', 'next'],
      ['op-1', 'complete'],
      ['op-1', 'next'],
      ['op-1', 'complete'],
    ]);
    expect(got[0]!.payload.data.mobileIdAuthentication.authReqId).toBe(first);
    expect(got[2]!.payload.data.mobileIdAuthentication.authReqId).toBe(second);
    expect(c.closed).toEqual([]);
    c.close();
  });

  it('a subscription ended by its result keeps nothing alive: the protocol’s loop, left waiting with the switch on, goes with it', async () => {
    // Live result streams after a full collection (queryObjects collects first); what earlier tests left is the base.
    const live = () => queryObjects(SharedResultStream, { format: 'count' }) as number;
    const before = live();
    const c = await connection(gw);
    const ids = Array.from({ length: 50 }, () => `req-${randomUUID()}`);
    ids.forEach((id, i) => c.subscribe(`op-${i}`, id));
    await waitFor(
      () => ids.every((id) => subscribers(gw, 'mobile-id', id) === 1),
      20_000,
      '50 subscriptions listening',
    );
    // The count sees them while they wait: this check can fail.
    expect(live() - before).toBeGreaterThanOrEqual(ids.length);
    for (const id of ids) await notify(gw, id);
    await waitFor(() => c.frames.length === 2 * ids.length, 20_000, 'every subscription ended');
    expect(c.frames.filter((f) => f.includes('"type":"complete"'))).toHaveLength(ids.length);
    expect(live() - before).toBeLessThanOrEqual(1);
    expect(c.closed).toEqual([]);
    c.close();
  });

  it('every way a subscription ends takes it out of its group, and a group goes with its last member (decision 105)', async () => {
    // Live groups after a full collection (queryObjects collects first); what earlier tests left is the base. Each
    // subscription here has variables of its own, so a group of its own, held by the shared execution while it lives.
    const live = () => queryObjects(Group, { format: 'count' }) as number;
    const before = live();
    const [ended, completed, dropped] = [await connection(gw), await connection(gw), await connection(gw)];
    const ids = (prefix: string) => Array.from({ length: 20 }, (_, i) => [`${prefix}-${i}`, `req-${randomUUID()}`]);
    const byResult = ids('result');
    const byComplete = ids('complete');
    const byClose = ids('close');
    for (const [op, id] of byResult) ended.subscribe(op!, id!);
    for (const [op, id] of byComplete) completed.subscribe(op!, id!);
    for (const [op, id] of byClose) dropped.subscribe(op!, id!);
    const all = [...byResult, ...byComplete, ...byClose].map(([, id]) => id!);
    await waitFor(
      () => all.every((id) => subscribers(gw, 'mobile-id', id) === 1),
      20_000,
      '60 subscriptions listening',
    );
    // The count sees their groups while they wait: this check can fail.
    expect(live() - before).toBeGreaterThanOrEqual(all.length);
    for (const [, id] of byResult) await notify(gw, id!);
    for (const [op] of byComplete) completed.complete(op!);
    dropped.close();
    await waitFor(() => ended.frames.length === 2 * byResult.length, 20_000, 'every result delivered');
    await waitFor(() => all.every((id) => subscribers(gw, 'mobile-id', id) === 0), 20_000, 'every subscription gone');
    await waitFor(() => live() - before <= 0, 20_000, 'every group gone');
    expect(live() - before).toBeLessThanOrEqual(0);
    ended.close();
    completed.close();
  });
});
