// Subscriptions over Server-Sent Events (graphql-sse) on /graphql/stream, in both of graphql-sse's modes, driven by
// graphql-sse's own client over real HTTP against the gateway on port 0.
import { createClient, type Client } from 'graphql-sse';
import { sql } from 'kysely';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { gatewaysPerTest, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const start = gatewaysPerTest();
const clients: Client[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.dispose();
});

function sseClient(gw: TestGateway, options: { key?: string; singleConnection: boolean }): Client {
  const client = createClient({
    url: `${gw.url}/graphql/stream`,
    singleConnection: options.singleConnection,
    headers: options.key ? { authorization: `Bearer ${options.key}` } : {},
    retryAttempts: 0,
  });
  clients.push(client);
  return client;
}

interface Collected {
  results: any[];
  errors: unknown[];
  done: Promise<void>;
}

function subscribe(client: Client, query: string, variables: Record<string, unknown>): Collected {
  const results: any[] = [];
  const errors: unknown[] = [];
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  client.subscribe(
    { query, variables },
    {
      next: (v) => results.push(v),
      error: (e) => {
        errors.push(e);
        resolve();
      },
      complete: () => resolve(),
    },
  );
  return { results, errors, done };
}

async function complete(
  gw: TestGateway,
  authReqId: string,
  outcome: 'SUCCESS' | 'CLIENT_TIMEOUT' = 'CLIENT_TIMEOUT',
): Promise<void> {
  const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome });
  expect((await postNotification(gw, n.body)).status).toBe(204);
}

for (const singleConnection of [false, true]) {
  const mode = singleConnection ? 'single-connection mode' : 'distinct-connections mode';

  describe(`subscriptions over SSE, graphql-sse ${mode}`, () => {
    it('streams a mobile-ID result that arrives while the app is subscribed, then completes', async () => {
      const gw = await start({ GATEWAY_API_KEYS: 'app-key' });
      const sub = subscribe(sseClient(gw, { key: 'app-key', singleConnection }), SUBSCRIPTION, { id: `live-${mode}` });
      await waitForSubscribers(gw, 'mobile-id', `live-${mode}`);
      await complete(gw, `live-${mode}`);
      await sub.done;
      expect(sub.errors).toEqual([]);
      expect(sub.results).toHaveLength(1);
      expect(sub.results[0].data.mobileIdAuthentication).toMatchObject({
        __typename: 'MobileIdAuthenticationFailed',
        authReqId: `live-${mode}`,
        reason: 'CLIENT_TIMEOUT',
      });
    });

    it('replays a result that arrived before the app subscribed', async () => {
      const gw = await start({ GATEWAY_API_KEYS: 'app-key' });
      await complete(gw, `late-${mode}`);
      const sub = subscribe(sseClient(gw, { key: 'app-key', singleConnection }), SUBSCRIPTION, { id: `late-${mode}` });
      await sub.done;
      expect(sub.errors).toEqual([]);
      expect(sub.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual([`late-${mode}`]);
    });

    it('refuses an app without a valid API key, as HTTP and WebSocket do', async () => {
      const gw = await start({ GATEWAY_API_KEYS: 'app-key' });
      for (const key of [undefined, 'wrong-key']) {
        const sub = subscribe(sseClient(gw, { key, singleConnection }), SUBSCRIPTION, { id: 'nobody' });
        await sub.done;
        expect(sub.results).toEqual([]);
        expect(sub.errors).toHaveLength(1);
        const response = (sub.errors[0] as { response?: Response }).response;
        expect(response?.status, String(sub.errors[0])).toBe(401);
      }
      // What the client saw: the body HTTP answers with, for the request that opens each mode.
      const res = await request(`${gw.url}/graphql/stream`, {
        method: singleConnection ? 'PUT' : 'POST',
        headers: {
          authorization: 'Bearer wrong-key',
          'content-type': 'application/json',
          accept: singleConnection ? '*/*' : 'text/event-stream',
        },
        body: singleConnection ? undefined : JSON.stringify({ query: SUBSCRIPTION, variables: { id: 'nobody' } }),
      });
      expect(res.statusCode).toBe(401);
      expect(((await res.body.json()) as any).errors[0].extensions.code).toBe('UNAUTHENTICATED');
    });

    it('answers an invalid document with the validation error, not a crash', async () => {
      const gw = await start();
      const sub = subscribe(sseClient(gw, { singleConnection }), 'subscription { noSuchField }', {});
      await sub.done;
      const error = sub.errors[0] ?? sub.results[0];
      expect(JSON.stringify(error)).toMatch(/Cannot query field \\?"noSuchField\\?" on type \\?"Subscription\\?"/);
    });

    it('masks an unexpected failure as INTERNAL_SERVER_ERROR, exactly as graphql-ws does, and logs it for the operator', async () => {
      const gw = await start();
      // A real internal fault: the event log's table is gone, so reading the stored result fails in SQLite.
      await sql`drop table events`.execute(gw.gateway.services.store.db);
      const sse = subscribe(sseClient(gw, { singleConnection }), SUBSCRIPTION, { id: 'broken' });
      await sse.done;
      const ws = collect(wsClient(gw), SUBSCRIPTION, { id: 'broken' });
      await ws.done;
      expect(sse.errors).toEqual([]);
      expect(ws.errors).toEqual([]);
      const masked = [
        {
          message: 'Internal server error',
          locations: [{ line: 1, column: 30 }],
          path: ['mobileIdAuthentication'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        },
      ];
      expect(sse.results).toEqual([{ data: null, errors: masked }]);
      expect(ws.results).toEqual(sse.results);
      expect(gw.logs()).toMatch(/no such table: events/);
    });
  });
}

describe('the SSE transport', () => {
  it('carries two subscriptions over one event stream in single-connection mode', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'app-key' });
    const client = sseClient(gw, { key: 'app-key', singleConnection: true });
    const a = subscribe(client, SUBSCRIPTION, { id: 'one-stream-a' });
    const b = subscribe(client, SUBSCRIPTION, { id: 'one-stream-b' });
    await waitForSubscribers(gw, 'mobile-id', 'one-stream-a');
    await waitForSubscribers(gw, 'mobile-id', 'one-stream-b');
    await complete(gw, 'one-stream-b');
    await complete(gw, 'one-stream-a', 'SUCCESS');
    await Promise.all([a.done, b.done]);
    expect(a.results[0].data.mobileIdAuthentication.__typename).toBe('MobileIdAuthenticated');
    expect(b.results[0].data.mobileIdAuthentication.reason).toBe('CLIENT_TIMEOUT');
  });

  it("does not let one app add operations to another app's reserved stream", async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'app-a,app-b' });
    const put = await request(`${gw.url}/graphql/stream`, {
      method: 'PUT',
      headers: { authorization: 'Bearer app-a' },
    });
    expect(put.statusCode).toBe(201);
    const token = await put.body.text();
    const post = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: {
        authorization: 'Bearer app-b',
        'content-type': 'application/json',
        'x-graphql-event-stream-token': token,
      },
      body: JSON.stringify({ query: SUBSCRIPTION, variables: { id: 'theirs' }, extensions: { operationId: 'x' } }),
    });
    expect(post.statusCode).toBe(404);
    await post.body.text();
    // The owner still can.
    const own = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: {
        authorization: 'Bearer app-a',
        'content-type': 'application/json',
        'x-graphql-event-stream-token': token,
      },
      body: JSON.stringify({ query: SUBSCRIPTION, variables: { id: 'mine' }, extensions: { operationId: 'x' } }),
    });
    expect(own.statusCode).toBe(202);
    await own.body.text();
  });

  it('refuses a body over GRAPHQL_MAX_BODY_BYTES with 413, as POST /graphql does', async () => {
    const gw = await start();
    const res = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: `subscription { mobileIdAuthentication(authReqId: "${'x'.repeat(1024 * 1024)}") { __typename } }`,
      }),
    });
    expect(res.statusCode).toBe(413);
    const refusal = (await res.body.json()) as any;
    expect(refusal.errors[0].message).toMatch(/exceeds 102400 bytes/);
    // The same refusal as POST /graphql's, word for word: it names the variable and its value (docs/graphql-api.md).
    const graphql = await request(`${gw.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: `{ __typename }`, variables: { x: 'x'.repeat(200 * 1024) } }),
    });
    expect(graphql.statusCode).toBe(413);
    expect(refusal).toEqual(await graphql.body.json());
    expect(refusal.errors[0].extensions).toEqual({ code: 'BAD_REQUEST', limit: 'GRAPHQL_MAX_BODY_BYTES', max: 102400 });
  });

  it('limits how many streams one app may hold reserved without connecting them', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'app-a,app-b' });
    const reserve = async (key: string) => {
      const res = await request(`${gw.url}/graphql/stream`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${key}` },
      });
      await res.body.text();
      return res.statusCode;
    };
    const statuses: number[] = [];
    for (let i = 0; i < 17; i++) statuses.push(await reserve('app-a'));
    expect(statuses.slice(0, 16)).toEqual(Array(16).fill(201));
    expect(statuses[16]).toBe(409);
    // Past the bound of what an app holds: RATE_LIMITED naming the bound (docs/contract.md, Error codes).
    const refused = await request(`${gw.url}/graphql/stream`, {
      method: 'PUT',
      headers: { authorization: 'Bearer app-a' },
    });
    expect(refused.statusCode).toBe(409);
    expect(((await refused.body.json()) as any).errors[0].extensions).toEqual({
      code: 'RATE_LIMITED',
      bound: 'sse-reservations:count',
      limit: 16,
    });
    // Another app is not affected.
    expect(await reserve('app-b')).toBe(201);
  });
});

describe('reserved SSE streams that are never connected', () => {
  it('are released when their reservation times out: the app may reserve again, and the released token names no stream', async () => {
    const releases: Array<() => void> = [];
    const gw = await startTestGateway(
      { GATEWAY_API_KEYS: 'app-r' },
      { testing: { scheduleSseRelease: (release) => releases.push(release) } },
    );
    try {
      const reserve = async () => {
        const res = await request(`${gw.url}/graphql/stream`, {
          method: 'PUT',
          headers: { authorization: 'Bearer app-r' },
        });
        return { status: res.statusCode, token: await res.body.text() };
      };
      const tokens: string[] = [];
      for (let i = 0; i < 16; i++) {
        const r = await reserve();
        expect(r.status).toBe(201);
        tokens.push(r.token);
      }
      expect((await reserve()).status).toBe(409);
      expect(releases).toHaveLength(16);

      // The first reservation times out: graphql-sse frees it (its event stream ends), and the app's budget comes back.
      releases[0]!();
      const again = await waitFor(
        async () => {
          const r = await reserve();
          return r.status !== 409 && r;
        },
        20_000,
        'the released reservation',
      );
      expect(again.status).toBe(201);
      expect((await reserve()).status).toBe(409);
      // The released token is answered as one never issued.
      const get = async (token: string) => {
        const res = await request(`${gw.url}/graphql/stream?token=${encodeURIComponent(token)}`, {
          headers: { authorization: 'Bearer app-r', accept: 'text/event-stream' },
        });
        return { status: res.statusCode, body: await res.body.text() };
      };
      expect(await get(tokens[0]!)).toEqual(await get('never-issued-token'));
    } finally {
      await gw.close();
    }
  });
});
