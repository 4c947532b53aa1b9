// A 2026-07-28 subscriptions/listen whose params the MCP schema refuses (no notifications, resourceSubscriptions a
// number, notifications a string) is answered -32602 in the gateway's words, naming the field in data.field, with its
// own id, as every other request's params are (src/server/mcp/params.ts), and before anything is counted or charged:
// no point of the app's reads budget (RATE_LIMIT_READS), no place among its live subscriptions
// (APP_LIVE_SUBSCRIPTIONS), even when that bound is reached. A well-formed listen is served as before. Over real HTTP,
// with raw requests.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { scopeOfApp } from '../../../src/auth/caller.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { pointsAllowed, RAW_META, rawListen, rawMcpPost } from '../../helpers/mcp.js';
import { waitFor } from '../../helpers/wait.js';

const KEY = 'listen-params-refused-key-0123456789';
const AGENT = scopeOfApp('agent');
let gw: TestGateway;
const open: AbortController[] = [];
beforeAll(async () => {
  // One live subscription at most: a listen counted while another is open would be refused for the bound instead.
  gw = await startTestGateway({
    GATEWAY_API_KEYS: `agent:${KEY}`,
    RATE_LIMIT_READS: '1000/1h',
    APP_LIVE_SUBSCRIPTIONS: '1',
  });
});
afterEach(async () => {
  for (const stream of open.splice(0)) stream.abort();
  await liveIs(0);
});
afterAll(() => gw.close());

const live = () => gw.gateway.services.liveSubscriptions.of(AGENT);
const liveIs = (n: number) => waitFor(() => live() === n, 20_000, `${n} live subscription(s) (now ${live()})`);

/** The reads points the app has been allowed: each listen opened spends one. */
const readsSpent = () => pointsAllowed(gw, 'agent', 'reads');

/** POSTs a subscriptions/listen of `id` with `params` at 2026-07-28: the status and its JSON answer. */
async function listen(id: string, params: unknown): Promise<{ status: number; answer: Record<string, any> }> {
  const body = { jsonrpc: '2.0', id, method: 'subscriptions/listen', params };
  const headers = { 'mcp-method': 'subscriptions/listen', 'mcp-protocol-version': '2026-07-28' };
  const { status, messages } = await rawMcpPost(gw, KEY, body, headers);
  return { status, answer: messages[0]! };
}

const refused = (id: string, field: string, said: string) => ({
  jsonrpc: '2.0',
  id,
  error: { code: -32602, message: `Invalid params: ${said}`, data: { field } },
});

const NOTIFICATIONS = '(the changes to be told of, such as {"resourceSubscriptions": ["<resource URI>"]})';

const cases = [
  [
    'its params only _meta',
    'no-notifications',
    { _meta: RAW_META },
    refused(
      'no-notifications',
      'params.notifications',
      `params.notifications is missing where an object is expected ${NOTIFICATIONS}`,
    ),
  ],
  [
    'resourceSubscriptions a number',
    'subscriptions-a-number',
    { _meta: RAW_META, notifications: { resourceSubscriptions: 5 } },
    refused(
      'subscriptions-a-number',
      'params.notifications.resourceSubscriptions',
      'params.notifications.resourceSubscriptions is a number where an array is expected (the URIs of the resources whose changes are to be told)',
    ),
  ],
  [
    'notifications a string',
    'notifications-a-string',
    { _meta: RAW_META, notifications: 'resources' },
    refused(
      'notifications-a-string',
      'params.notifications',
      `params.notifications is a string where an object is expected ${NOTIFICATIONS}`,
    ),
  ],
] as const;

describe('a subscriptions/listen whose params the schema refuses', () => {
  it.each(cases)('%s: -32602 naming the field, and nothing counted or charged', async (_name, id, params, answer) => {
    const before = await readsSpent();
    const { status, answer: got } = await listen(id, params);
    // Soft: on a refusal of another kind, whether the listen was charged or counted is told as well.
    expect.soft(status).toBe(200);
    expect.soft(got).toEqual(answer);
    expect(await readsSpent()).toBe(before);
    expect(live()).toBe(0);
  });

  it.each(cases)('%s, while the app holds its one live subscription: refused for its params', async (...c) => {
    const [, id, params, answer] = c;
    const stream = new AbortController();
    open.push(stream);
    const ack = await rawListen(gw, {
      key: KEY,
      id: `held-${id}`,
      uris: ['mobileid://authentications/held'],
      signal: stream.signal,
    });
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    expect(live()).toBe(1);
    const before = await readsSpent();
    const { status, answer: got } = await listen(id, params);
    // Soft: on a refusal of another kind, whether the listen was charged or counted is told as well.
    expect.soft(status).toBe(200);
    expect.soft(got).toEqual(answer);
    expect(await readsSpent()).toBe(before);
    expect(live()).toBe(1);
  });
});

describe('a well-formed subscriptions/listen', () => {
  it('is acknowledged, spends a point of the reads budget and counts as a live subscription while open', async () => {
    const before = await readsSpent();
    const stream = new AbortController();
    open.push(stream);
    const ack = await rawListen(gw, {
      key: KEY,
      id: 'well-formed',
      uris: ['mobileid://authentications/well-formed'],
      signal: stream.signal,
    });
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    expect(ack.params.notifications).toEqual({ resourceSubscriptions: ['mobileid://authentications/well-formed'] });
    expect(await readsSpent()).toBe(before + 1);
    expect(live()).toBe(1);
  });
});

describe('a subscriptions/listen of an era that has no such method', () => {
  it('is answered by the SDK (-32601) and neither charged nor counted', async () => {
    const before = await readsSpent();
    // No 2026-07-28 _meta, no MCP-Protocol-Version header: a 2025-era request, whose methods have no listen.
    const { messages } = await rawMcpPost(gw, KEY, {
      jsonrpc: '2.0',
      id: 'old-era',
      method: 'subscriptions/listen',
      params: { notifications: { resourceSubscriptions: ['gateway://catalog'] } },
    });
    expect(messages[0]).toMatchObject({ id: 'old-era', error: { code: -32601 } });
    expect(await readsSpent()).toBe(before);
    expect(live()).toBe(0);
  });
});
