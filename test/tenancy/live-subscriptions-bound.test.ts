// APP_LIVE_SUBSCRIPTIONS: one app's live subscriptions on a replica, over graphql-ws, SSE and MCP together, are
// bounded. Past the bound a new one is refused with RATE_LIMITED (extensions.bound subscriptions:live, limit) in each
// transport's own way, and nothing else changes: the app's other subscriptions go on, another app is not affected,
// and ending one lets a new one in. Every way a subscription ends gives its count back.
import { createClient as createSseClient, type Client as SseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { scopeOfApp } from '../../src/auth/caller.js';
import { configRefusal, gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { mcpClient, rawListen, textOf, type TestMcpClient } from '../helpers/mcp.js';
import { collect, postNotification, SUBSCRIPTION, wsClient, type Collected } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const disposers: (() => unknown)[] = [];
afterEach(async () => {
  await Promise.all(disposers.splice(0).map(async (d) => d()));
});

const ENV = { GATEWAY_API_KEYS: 'alpha:key-a,beta:key-b', RATE_LIMIT_READS: 'off', APP_LIVE_SUBSCRIPTIONS: '3' };
const ALPHA = scopeOfApp('alpha');
const BETA = scopeOfApp('beta');

const live = (gw: TestGateway, scope: string) => gw.gateway.services.liveSubscriptions.of(scope);
const liveIs = (gw: TestGateway, scope: string, n: number) =>
  waitFor(() => live(gw, scope) === n, 20_000, `${n} live subscription(s) of ${scope} (now ${live(gw, scope)})`);

function ws(gw: TestGateway, key?: string) {
  const client = wsClient(gw, key ? { key } : {});
  disposers.push(() => client.dispose());
  return client;
}

function sse(gw: TestGateway, key: string): SseClient {
  const client = createSseClient({
    url: `${gw.url}/graphql/stream`,
    headers: { authorization: `Bearer ${key}` },
    retryAttempts: 0,
  });
  disposers.push(() => client.dispose());
  return client;
}

async function mcp(gw: TestGateway, key: string): Promise<TestMcpClient> {
  const client = await mcpClient(gw, { key });
  disposers.push(() => client.close().catch(() => undefined));
  return client;
}

/** A mobile-ID result for `authReqId` on a token `key`'s app issued: it ends that app's subscription to it. */
async function finish(gw: TestGateway, key: string, authReqId: string): Promise<void> {
  const issued = await gw.graphql(
    `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`,
    { id: authReqId },
    { key },
  );
  const token = (issued.data!.issueMobileIdNotificationToken as { token: string }).token;
  const { body } = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(gw, body, { token })).status).toBe(204);
}

const REFUSAL = { code: 'RATE_LIMITED', bound: 'subscriptions:live', limit: 3, variable: 'APP_LIVE_SUBSCRIPTIONS' };

/** Three live graphql-ws subscriptions of `key`'s app, on one connection. */
async function threeOverWs(gw: TestGateway, key: string, scope: string, prefix: string): Promise<Collected[]> {
  const client = ws(gw, key);
  const subs = [1, 2, 3].map((i) => collect(client, SUBSCRIPTION, { id: `${prefix}-${i}` }));
  await liveIs(gw, scope, 3);
  return subs;
}

describe('APP_LIVE_SUBSCRIPTIONS bounds the live subscriptions of one app on a replica', () => {
  it('graphql-ws: the 4th is refused with an `error` for its id alone; its connection and the others go on', async () => {
    const gw = await start(ENV);
    const client = ws(gw, 'key-a');
    const subs = [1, 2, 3].map((i) => collect(client, SUBSCRIPTION, { id: `ws-${i}` }));
    await liveIs(gw, ALPHA, 3);

    const fourth = collect(client, SUBSCRIPTION, { id: 'ws-4' });
    await fourth.done;
    expect(fourth.completed()).toBe(false);
    const [error] = fourth.errors[0] as { message: string; extensions: Record<string, unknown> }[];
    expect(error!.extensions).toMatchObject(REFUSAL);
    expect(error!.message).toMatch(/already has 3 live subscriptions on this replica \(APP_LIVE_SUBSCRIPTIONS\)/);
    // Over another connection of the same app too.
    const elsewhere = collect(ws(gw, 'key-a'), SUBSCRIPTION, { id: 'ws-5' });
    await elsewhere.done;
    expect((elsewhere.errors[0] as { extensions: unknown }[])[0]!.extensions).toMatchObject(REFUSAL);
    expect(live(gw, ALPHA)).toBe(3);

    // Another app is not affected.
    const other = collect(ws(gw, 'key-b'), SUBSCRIPTION, { id: 'beta-1' });
    await liveIs(gw, BETA, 1);
    expect(other.errors).toEqual([]);

    // The refused one changed nothing: the others still get their results on the same connection.
    await finish(gw, 'key-a', 'ws-1');
    await subs[0]!.done;
    expect(subs[0]!.results).toHaveLength(1);
    expect(subs[0]!.completed()).toBe(true);
    await liveIs(gw, ALPHA, 2);
    // Ending one lets a new one in.
    const again = collect(client, SUBSCRIPTION, { id: 'ws-6' });
    await liveIs(gw, ALPHA, 3);
    expect(again.errors).toEqual([]);
    await finish(gw, 'key-a', 'ws-6');
    await again.done;
    expect(again.results).toHaveLength(1);
  });

  it('SSE: the 4th (the others over graphql-ws) is refused as a refused operation is there', async () => {
    const gw = await start(ENV);
    await threeOverWs(gw, 'key-a', ALPHA, 'mixed');
    const refused = collect(sse(gw, 'key-a'), SUBSCRIPTION, { id: 'sse-4' });
    await refused.done;
    // As graphql-sse answers every refused operation here: one `next` with the errors and no data, then `complete`.
    expect(refused.errors).toEqual([]);
    expect(refused.completed()).toBe(true);
    expect(refused.results).toHaveLength(1);
    expect(refused.results[0].data).toBeNull();
    expect(refused.results[0].errors[0].extensions).toMatchObject(REFUSAL);
    expect(live(gw, ALPHA)).toBe(3);

    // Another app over SSE is not affected; its subscription ends with its result and gives its count back.
    const other = collect(sse(gw, 'key-b'), SUBSCRIPTION, { id: 'sse-beta' });
    await liveIs(gw, BETA, 1);
    await finish(gw, 'key-b', 'sse-beta');
    await other.done;
    expect(other.results).toHaveLength(1);
    await liveIs(gw, BETA, 0);
  });

  it('MCP: a 4th subscriptions/listen and a 4th waiting wait_for_events are refused in its error forms', async () => {
    const gw = await start(ENV);
    await threeOverWs(gw, 'key-a', ALPHA, 'mcp');
    const abort = new AbortController();
    disposers.push(() => abort.abort());
    const listen = await rawListen(gw, {
      key: 'key-a',
      id: 'l-1',
      uris: ['mobileid://authentications/x'],
      signal: abort.signal,
    });
    expect(listen.error).toMatchObject({ code: -32603, data: REFUSAL });
    expect(listen.error.message).toMatch(/APP_LIVE_SUBSCRIPTIONS/);

    const agent = await mcp(gw, 'key-a');
    const waited = await agent.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 300 });
    expect(waited.isError).toBe(true);
    expect(textOf(waited)).toMatch(/APP_LIVE_SUBSCRIPTIONS/);
    expect(waited.structuredContent!.errors[0]).toMatchObject(REFUSAL);
    // A call that returns at once holds nothing and is not counted.
    expect((await agent.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 })).isError).toBeFalsy();
    expect(live(gw, ALPHA)).toBe(3);
  });

  it('every way a subscription ends gives its count back', async () => {
    const gw = await start(ENV);
    // Its last result (a mobile-ID result completes the subscription).
    let subs = await threeOverWs(gw, 'key-a', ALPHA, 'last');
    await finish(gw, 'key-a', 'last-1');
    await subs[0]!.done;
    await liveIs(gw, ALPHA, 2);
    // The client's `complete`.
    subs[1]!.stop();
    await liveIs(gw, ALPHA, 1);
    // The socket's close.
    await disposers.pop()!();
    await liveIs(gw, ALPHA, 0);

    // A subscription its own field refuses (a malformed cursor) never streams: nothing stays counted.
    const bad = collect(
      ws(gw, 'key-a'),
      `subscription($id: String!, $after: String) { mobileIdAuthentication(authReqId: $id, after: $after) { __typename } }`,
      { id: 'bad', after: 'not-a-cursor' },
    );
    await bad.done;
    expect(live(gw, ALPHA)).toBe(0);

    // SSE: the client going away.
    const client = sse(gw, 'key-a');
    collect(client, SUBSCRIPTION, { id: 'sse-gone' });
    await liveIs(gw, ALPHA, 1);
    client.dispose();
    await liveIs(gw, ALPHA, 0);

    // SSE's single-connection mode: a reserved stream whose client goes away.
    const reserved = createSseClient({
      url: `${gw.url}/graphql/stream`,
      headers: { authorization: 'Bearer key-a' },
      singleConnection: true,
      retryAttempts: 0,
    });
    disposers.push(() => reserved.dispose());
    collect(reserved, SUBSCRIPTION, { id: 'sse-reserved-1' });
    collect(reserved, SUBSCRIPTION, { id: 'sse-reserved-2' });
    await liveIs(gw, ALPHA, 2);
    reserved.dispose();
    await liveIs(gw, ALPHA, 0);

    // MCP: a listen stream closed by its client, a wait that returns.
    const abort = new AbortController();
    const opened = await rawListen(gw, {
      key: 'key-a',
      id: 'l',
      uris: ['mobileid://authentications/x'],
      signal: abort.signal,
    });
    expect(opened.error).toBeUndefined();
    await liveIs(gw, ALPHA, 1);
    abort.abort();
    await liveIs(gw, ALPHA, 0);
    const agent = await mcp(gw, 'key-a');
    const { cursor } = (await agent.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 }))
      .structuredContent as { cursor: string };
    const waiting = agent.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    await liveIs(gw, ALPHA, 1);
    await finish(gw, 'key-a', 'wait-1');
    expect((await waiting).structuredContent!.events).toHaveLength(1);
    await liveIs(gw, ALPHA, 0);

    // The gauge says the same, per app.
    subs = await threeOverWs(gw, 'key-a', ALPHA, 'gauge');
    const metrics = await (await request(`${gw.url}/metrics`)).body.text();
    expect(metrics).toMatch(/^gateway_live_subscriptions\{app="alpha"\} 3$/m);
    // Shutdown.
    await gw.close();
    expect(live(gw, ALPHA)).toBe(0);
  });

  it('callers with no app (an open gateway) share one count', async () => {
    const gw = await start({ APP_LIVE_SUBSCRIPTIONS: '1' });
    collect(ws(gw), SUBSCRIPTION, { id: 'open-1' });
    await liveIs(gw, 'open', 1);
    const other = createSseClient({ url: `${gw.url}/graphql/stream`, retryAttempts: 0 });
    disposers.push(() => other.dispose());
    const second = collect(other, SUBSCRIPTION, { id: 'open-2' });
    await second.done;
    expect(second.results[0].errors[0].extensions).toMatchObject({ ...REFUSAL, limit: 1 });
  });

  it('a bad value stops start-up naming the variable; 0 is no limit', async () => {
    for (const bad of ['-1', 'many', '1.5', '100000001'])
      expect(configRefusal({ APP_LIVE_SUBSCRIPTIONS: bad })).toMatch(
        /APP_LIVE_SUBSCRIPTIONS.*must be an integer from 0 to 100000000/,
      );
    const gw = await start({ APP_LIVE_SUBSCRIPTIONS: '0' });
    const client = ws(gw);
    for (const i of [1, 2, 3, 4, 5]) collect(client, SUBSCRIPTION, { id: `unbounded-${i}` });
    await liveIs(gw, 'open', 5);
  });
});
