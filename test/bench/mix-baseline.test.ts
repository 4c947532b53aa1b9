/**
 * Scenario 7's floor (bench/servers/mix-baseline.ts: the realistic mix's work written by hand), checked so that a
 * broken floor fails `npm test` rather than reading as a fast one: a notification to a waiting subscriber is durable
 * in its SQLite file before the 204 and reaches the subscriber once, as the gateway writes it (`next` with the view
 * and a cursor, then `complete`); one stored before its subscriber is delivered from the log; a repeat is a
 * duplicate (204, delivered no more), a changed body a conflict; a wrong token, a bad body, a wrong key and an unknown
 * operation change nothing.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';

import { SUBSCRIPTION } from '../../bench/scenarios/fanout.js';
import { notificationBody } from '../../bench/scenarios/webhook.js';
import { startMixBaseline, type MixBaseline } from '../../bench/servers/mix-baseline.js';

const API_KEY = 'floor-api-key';
const TOKEN = 'floor-notification-token';

let dir: string;
let floor: MixBaseline;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mix-baseline-test-'));
  floor = await startMixBaseline({ dataDir: dir, apiKey: API_KEY, notificationToken: TOKEN, query: SUBSCRIPTION });
});
afterAll(async () => {
  await floor?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A graphql-transport-ws connection, acknowledged; every later message's text in `messages`, and a wait for one. */
async function connect(key = API_KEY): Promise<{
  ws: WebSocket;
  messages: string[];
  next(count: number): Promise<void>;
  closed: Promise<number>;
}> {
  const ws = new WebSocket(`${floor.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  const messages: string[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  const acked = new Promise<void>((resolve, reject) => {
    ws.once('error', reject);
    ws.on('message', (data) => {
      const text = String(data);
      if (text === '{"type":"connection_ack"}') return resolve();
      messages.push(text);
      for (const w of waiters.filter((w) => messages.length >= w.count)) w.resolve();
    });
    void closed.then(() => resolve());
  });
  await new Promise<void>((resolve) => ws.once('open', () => resolve()));
  ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${key}` } }));
  await acked;
  return {
    ws,
    messages,
    next: (count) =>
      messages.length >= count ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve })),
    closed,
  };
}

function subscribe(ws: WebSocket, id: string, authReqId: string, query = SUBSCRIPTION): void {
  ws.send(JSON.stringify({ id, type: 'subscribe', payload: { query, variables: { authReqId } } }));
}

async function notify(authReqId: string, body = notificationBody(), token = TOKEN): Promise<number> {
  const res = await request(`${floor.url}/webhooks/mobile-id`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: body.replace('{{uuid}}', authReqId),
  });
  await res.body.dump();
  return res.statusCode;
}

/** The rows the floor's log holds for a key, read from its file by another connection (what is committed). */
function stored(authReqId: string): number {
  const db = new SQLite(path.join(dir, 'mix-baseline.sqlite'), { readonly: true });
  try {
    return (db.prepare('select count(*) as n from events where key = ?').get(authReqId) as { n: number }).n;
  } finally {
    db.close();
  }
}

/** Until the floor counts `n` waiting subscriptions (a subscribe has no answer of its own). */
async function waiting(n: number): Promise<void> {
  while (floor.subscribers() !== n) await new Promise((r) => setTimeout(r, 2));
}

describe("the realistic mix written by hand (scenario 7's floor)", () => {
  it('stores a notification before its 204 and delivers it once to its waiting subscriber, then completes', async () => {
    const c = await connect();
    subscribe(c.ws, '1', 'floor-a');
    await waiting(1);
    expect(await notify('floor-a')).toBe(204);
    expect(stored('floor-a')).toBe(1);
    await c.next(2);
    const next = JSON.parse(c.messages[0]!) as {
      id: string;
      type: string;
      payload: { data: { mobileIdAuthentication: Record<string, unknown> }; extensions: { cursor: string } };
    };
    expect(next.id).toBe('1');
    expect(next.type).toBe('next');
    expect(next.payload.data.mobileIdAuthentication).toMatchObject({
      authReqId: 'floor-a',
      subject: '79001234567',
      correlationId: null,
    });
    expect(Date.parse(next.payload.data.mobileIdAuthentication.receivedAt as string)).not.toBeNaN();
    expect(next.payload.extensions.cursor).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(c.messages[1]).toBe('{"id":"1","type":"complete"}');
    expect(floor.subscribers()).toBe(0);
    // The same notification again: a duplicate, stored once, delivered to nobody (the subscription ended).
    expect(await notify('floor-a')).toBe(204);
    expect(stored('floor-a')).toBe(1);
    // The same key with another body: a conflict.
    expect(await notify('floor-a', notificationBody().replace('bench-access-token', 'other'))).toBe(409);
    expect(stored('floor-a')).toBe(1);
    c.ws.close();
    await c.closed;
    expect(c.messages).toHaveLength(2);
  });

  it('delivers a notification stored before its subscriber from the log', async () => {
    expect(await notify('floor-b')).toBe(204);
    const c = await connect();
    subscribe(c.ws, 'x', 'floor-b');
    await c.next(2);
    expect(JSON.parse(c.messages[0]!)).toMatchObject({
      id: 'x',
      type: 'next',
      payload: { data: { mobileIdAuthentication: { authReqId: 'floor-b' } } },
    });
    expect(c.messages[1]).toBe('{"id":"x","type":"complete"}');
    c.ws.close();
    await c.closed;
  });

  it('refuses a wrong token and a bad body, storing nothing', async () => {
    expect(await notify('floor-c', undefined, 'wrong')).toBe(401);
    expect(await notify('floor-c', '{"auth_req_id":')).toBe(400);
    expect(await notify('floor-c', JSON.stringify({ auth_req_id: '{{uuid}}', access_token: 'a' }))).toBe(400);
    expect(stored('floor-c')).toBe(0);
  });

  it('closes a connection with a wrong key (4403) and answers an unknown operation with an error', async () => {
    const refused = await connect('wrong-key');
    expect(await refused.closed).toBe(4403);
    const c = await connect();
    subscribe(c.ws, '7', 'floor-d', '{ __typename }');
    await c.next(1);
    expect(JSON.parse(c.messages[0]!)).toMatchObject({ id: '7', type: 'error' });
    expect(floor.subscribers()).toBe(0);
    c.ws.close();
    await c.closed;
  });
});
