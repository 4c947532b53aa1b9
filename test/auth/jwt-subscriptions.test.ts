// JWTs on the streaming transports: graphql-ws (connectionParams or the upgrade header) and graphql-sse. A connection
// opened with a JWT ends when the token expires; the test holds the scheduler, so nothing waits on a clock.
import { createClient as createSseClient, type Client as SseClient } from 'graphql-sse';
import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { scopeOfApp } from '../../src/auth/caller.js';
import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import type { TestGateway } from '../helpers/gateway.js';
import {
  nowSeconds,
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  testClock,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';
import { mcpClient } from '../helpers/mcp.js';
import { collect, postNotification, SUBSCRIPTION, wsClient, type Collected } from '../helpers/mobile-id.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const SHOP_KEY = 'shop-key-0123456789abcdef';
const REGISTER = `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`;
const COMPLETED = `subscription($id: ID) { verificationCompleted(externalId: $id) { externalId status } }`;
/** A subscription that stays open for the whole test. */
const OPEN = 'subscription { heartbeat(intervalMs: 60000, count: 1000) }';
const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;
const ISO = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z';

interface Scheduled {
  delay: number;
  expire: () => void;
  cancelled: boolean;
}

describe('JWTs over WebSocket and SSE', () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;
  let sandbox: VerificationSandbox;
  const clock = testClock();
  const scheduled: Scheduled[] = [];
  const clients: Array<Client | SseClient> = [];

  beforeAll(async () => {
    key = await signingKey('key-1');
    jwks = await startJwksServer([key]);
    t = await startJwtGateway(
      jwks,
      { GATEWAY_API_KEYS: `shop:${SHOP_KEY}`, AUTH_APPS: '*,shop=shop', SANDBOX_CALLBACK_DELAY_MS: '600000' },
      {
        testing: {
          clock: clock.now,
          scheduleAuthExpiry: (delay, expire) => {
            const entry = { delay, expire, cancelled: false };
            scheduled.push(entry);
            return () => (entry.cancelled = true);
          },
        },
      },
    );
    sandbox = t.gateway.sandbox.verification!;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await t.close();
    await jwks.stop();
  });

  const ws = (bearer: string, keyIn: 'params' | 'header' = 'params') => {
    const c = wsClient(t, { key: bearer, keyIn });
    clients.push(c);
    return c;
  };
  const sse = (bearer: string, singleConnection = false) => {
    const c = createSseClient({
      url: `${t.url}/graphql/stream`,
      singleConnection,
      headers: { authorization: `Bearer ${bearer}` },
      retryAttempts: 0,
    });
    clients.push(c);
    return c;
  };
  const sseCollect = (client: SseClient, query: string, variables: Record<string, unknown> = {}): Collected =>
    collect(client, query, variables);
  const registered = async () => {
    const res = await t.graphql(
      REGISTER,
      { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' } } },
      { key: SHOP_KEY },
    );
    expect(res.errors).toBeUndefined();
    return res.data!.registerVerification.verification.externalId as string;
  };
  /** A mobile-ID notification token for `authReqId`, issued by app shop while `bearer` is still valid. */
  const notificationToken = async (bearer: string, authReqId: string) => {
    const issued = await t.graphql(ISSUE, { id: authReqId }, { key: bearer });
    expect(issued.errors).toBeUndefined();
    return (issued.data!.issueMobileIdNotificationToken as { token: string }).token;
  };
  /** The mobile identity service reports the end of `authReqId` on the notification token app shop was issued. */
  const mobileIdResult = async (notification: string, authReqId: string) => {
    const { body } = await t.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
    expect((await postNotification(t, body, { token: notification })).status).toBe(204);
  };
  /** A token of app shop that expires `seconds` after the test clock's now. */
  const token = (seconds = 600) => sign(key, { exp: Math.floor(clock.now() / 1000) + seconds });
  /** A reserved SSE stream (single-connection mode) opened with `jwt`: reserved, then connected with GET. */
  const reservedStream = async (jwt: string) => {
    const exp = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).exp as number;
    const auth = { authorization: `Bearer ${jwt}` };
    const put = await request(`${t.url}/graphql/stream`, { method: 'PUT', headers: auth });
    expect(put.statusCode).toBe(201);
    const stream = { 'x-graphql-event-stream-token': await put.body.text() };
    const before = scheduled.length;
    const get = await request(`${t.url}/graphql/stream`, {
      method: 'GET',
      headers: { ...auth, ...stream, accept: 'text/event-stream' },
    });
    expect(get.statusCode).toBe(200);
    return { exp, auth, stream, before, get };
  };
  const nextScheduled = async (from: number) =>
    waitFor(() => scheduled.length > from && scheduled[scheduled.length - 1], 20_000, 'the expiry scheduled');

  it("a JWT is accepted over WebSocket, in connectionParams or the upgrade header, and its subscription receives what the app's API key registered", async () => {
    for (const keyIn of ['params', 'header'] as const) {
      const id = await registered();
      const before = scheduled.length;
      const sub = collect(ws(await token(), keyIn), COMPLETED, { id });
      await nextScheduled(before);
      await sandbox.complete(id);
      await waitFor(() => sub.results.length > 0, 20_000, 'the completion event');
      expect(sub.errors, keyIn).toEqual([]);
      expect(sub.results[0].data.verificationCompleted).toMatchObject({ externalId: id });
    }
  });

  it('a WebSocket opened with a JWT closes with 4403 naming the expiry when the token expires, scheduled exp − now after it opened', async () => {
    const before = scheduled.length;
    const jwt = await token(900);
    const sub = collect(ws(jwt), OPEN, {});
    const entry = await nextScheduled(before);
    const exp = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).exp as number;
    expect(entry.delay).toBe(exp * 1000 - clock.now());
    expect(sub.completed()).toBe(false);
    entry.expire();
    await sub.done;
    const closed = sub.errors[0] as { code: number; reason: string };
    expect(closed.code).toBe(4403);
    expect(closed.reason).toMatch(new RegExp(`^Forbidden: the JWT expired at ${ISO}; reconnect with a new token$`));
    expect(closed.reason).toContain(new Date(exp * 1000).toISOString());
  });

  it('a WebSocket closed by the app cancels its expiry', async () => {
    const before = scheduled.length;
    const client = ws(await token());
    const sub = collect(client, OPEN, {});
    const entry = await nextScheduled(before);
    sub.stop();
    await client.dispose();
    await waitFor(() => entry.cancelled, 20_000, 'the expiry cancelled');
  });

  it('an expired JWT is refused over WebSocket (4403 naming it) and over SSE (401 UNAUTHENTICATED naming it)', async () => {
    const expired = await sign(key, { exp: Math.floor(clock.now() / 1000) - 5 });
    const sub = collect(ws(expired), OPEN, {});
    await sub.done;
    expect(sub.errors[0]).toMatchObject({
      code: 4403,
      reason: expect.stringMatching(/^Forbidden: the JWT has expired \(exp /),
    });

    const res = await request(`${t.url}/graphql/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${expired}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: OPEN }),
    });
    expect(res.statusCode).toBe(401);
    const body = (await res.body.json()) as { errors: Array<{ message: string; extensions: { code: string } }> };
    expect(body.errors[0]).toMatchObject({
      message: expect.stringMatching(/^the JWT has expired/),
      extensions: { code: 'UNAUTHENTICATED' },
    });
  });

  it("a JWT is accepted over SSE, and its subscription receives what the app's API key registered", async () => {
    const id = await registered();
    const before = scheduled.length;
    const sub = sseCollect(sse(await token()), COMPLETED, { id });
    await nextScheduled(before);
    await sandbox.complete(id);
    await waitFor(() => sub.results.length > 0, 20_000, 'the completion event');
    expect(sub.errors).toEqual([]);
    expect(sub.results[0].data.verificationCompleted).toMatchObject({ externalId: id });
  });

  it('one expiry rule on the three streaming transports: graphql-ws, SSE and an MCP listen stream opened with one JWT are each scheduled to end exp − now after they opened, on the gateway clock, and each ends when it fires', async () => {
    const jwt = await token(450);
    const exp = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).exp as number;
    const expected = exp * 1000 - clock.now();
    // Each is one of the app's live subscriptions (APP_LIVE_SUBSCRIPTIONS) until its expiry ends it; the earlier
    // tests' clients are still open.
    const live = () => t.gateway.services.liveSubscriptions.of(scopeOfApp('shop'));
    const earlier = live();

    let before = scheduled.length;
    const overWs = collect(ws(jwt), OPEN, {});
    const wsEntry = await nextScheduled(before);

    before = scheduled.length;
    const overSse = sseCollect(sse(jwt), OPEN);
    const sseEntry = await nextScheduled(before);

    before = scheduled.length;
    const mcp = await mcpClient(t, { key: jwt });
    try {
      const listen = await mcp.client.listen({ resourceSubscriptions: ['mobileid://authentications/until-expiry'] });
      const mcpEntry = await nextScheduled(before);

      for (const entry of [wsEntry, sseEntry, mcpEntry]) expect(entry.delay).toBe(expected);
      expect(overWs.completed()).toBe(false);
      expect(overSse.completed()).toBe(false);

      expect(live()).toBe(earlier + 3);
      for (const entry of [wsEntry, sseEntry, mcpEntry]) entry.expire();
      await overWs.done;
      expect((overWs.errors[0] as { code: number }).code).toBe(4403);
      await overSse.done;
      expect(overSse.results.at(-1).errors[0].message).toContain(
        `the JWT expired at ${new Date(exp * 1000).toISOString()}`,
      );
      expect(await listen.closed).toBe('remote');
      await waitFor(() => live() === earlier, 20_000, 'the three live subscriptions given back once each expired');
    } finally {
      await mcp.close();
    }
  });

  for (const singleConnection of [false, true]) {
    it(`an SSE subscription opened with a JWT ends when the token expires: a last result naming the expiry, then complete (${singleConnection ? 'single-connection' : 'distinct-connections'} mode)`, async () => {
      const before = scheduled.length;
      const jwt = await token(300);
      const sub = sseCollect(sse(jwt, singleConnection), OPEN);
      // Single-connection mode: the reserved stream's expiry, then the subscription's, once it is added to the stream.
      await waitFor(() => scheduled.length === before + (singleConnection ? 2 : 1), 20_000, 'the expiries scheduled');
      const entry = scheduled.at(-1)!;
      const exp = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).exp as number;
      expect(entry.delay).toBe(exp * 1000 - clock.now());
      expect(sub.completed()).toBe(false);
      for (const e of scheduled.slice(before)) e.expire();
      await sub.done;
      expect(sub.errors).toEqual([]);
      expect(sub.completed()).toBe(true);
      const last = sub.results[sub.results.length - 1];
      expect(last.errors).toEqual([
        {
          message: `the JWT expired at ${new Date(exp * 1000).toISOString()}: the subscription has ended; subscribe again with a new token`,
          extensions: { code: 'UNAUTHENTICATED' },
        },
      ]);
    });
  }

  it('an SSE event stream opened with a JWT ends after its last event when the token expires', async () => {
    const before = scheduled.length;
    const jwt = await token(120);
    const res = await request(`${t.url}/graphql/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: OPEN }),
    });
    expect(res.statusCode).toBe(200);
    const entry = await nextScheduled(before);
    entry.expire();
    // The body ends: text() resolves only once the gateway has ended the response.
    const text = await res.body.text();
    const events = text.split('\n\n').filter((e) => e.startsWith('event:'));
    expect(events.at(-2)).toMatch(
      /^event: next\ndata: \{"errors":\[\{"message":"the JWT expired at [^"]+: the subscription has ended; subscribe again with a new token","extensions":\{"code":"UNAUTHENTICATED"\}\}\]\}$/,
    );
    expect(events.at(-1)).toBe('event: complete\ndata:');
  });

  it("a reserved SSE stream (single-connection mode) opened with a JWT ends when the token expires, after its subscriptions' last results", async () => {
    const jwt = await token(240);
    const { exp, auth, stream, before, get } = await reservedStream(jwt);
    const streamExpiry = await nextScheduled(before);
    expect(streamExpiry.delay).toBe(exp * 1000 - clock.now());
    for (const operationId of ['op-1', 'op-2']) {
      const post = await request(`${t.url}/graphql/stream`, {
        method: 'POST',
        headers: { ...auth, ...stream, 'content-type': 'application/json' },
        body: JSON.stringify({ query: OPEN, extensions: { operationId } }),
      });
      expect(post.statusCode).toBe(202);
    }
    // The stream's own expiry (not its subscriptions'): each subscription ends with its last result, then the stream.
    streamExpiry.expire();
    const text = await get.body.text();
    const events = text.split('\n\n').filter((e) => e.startsWith('event:'));
    for (const id of ['op-1', 'op-2']) {
      const message = `the JWT expired at ${new Date(exp * 1000).toISOString()}: the subscription has ended; subscribe again with a new token`;
      const last = events.indexOf(
        `event: next\ndata: {"id":"${id}","payload":{"errors":[{"message":"${message}","extensions":{"code":"UNAUTHENTICATED"}}]}}`,
      );
      expect(last, id).toBeGreaterThanOrEqual(0);
      expect(events.indexOf(`event: complete\ndata: {"id":"${id}"}`), id).toBeGreaterThan(last);
    }
    expect(events.at(-1)).toMatch(/^event: complete\ndata: \{"id":"op-[12]"\}$/);
  });

  it("a reserved SSE stream (single-connection mode) whose JWT has expired on the gateway clock ends as its scheduled end ends it when one subscription's own check notices it first: every subscription's last result, then the stream", async () => {
    const id = await registered();
    const jwt = await token(60);
    const { exp, auth, stream, before, get } = await reservedStream(jwt);
    let text = '';
    let ended = false;
    get.body.on('data', (chunk: Buffer) => (text += chunk.toString()));
    get.body.on('end', () => (ended = true));
    // op-1 waits for the verification's event; op-2 would not notice the expiry by itself before its next tick.
    const operations = { 'op-1': { query: COMPLETED, variables: { id } }, 'op-2': { query: OPEN } };
    for (const [operationId, operation] of Object.entries(operations)) {
      const post = await request(`${t.url}/graphql/stream`, {
        method: 'POST',
        headers: { ...auth, ...stream, 'content-type': 'application/json' },
        body: JSON.stringify({ ...operation, extensions: { operationId } }),
      });
      expect(post.statusCode).toBe(202);
    }
    // The stream's expiry and each subscription's, none of which the test fires.
    await waitFor(() => scheduled.length === before + 3, 20_000, 'the expiries scheduled');
    await waitForSubscribers(t, 'verification', id);
    clock.advance(61_000);
    await sandbox.complete(id);
    await waitFor(() => ended, 20_000, 'the reserved stream ended');
    const events = text.split('\n\n').filter((e) => e.startsWith('event:'));
    const message = `the JWT expired at ${new Date(exp * 1000).toISOString()}: the subscription has ended; subscribe again with a new token`;
    for (const operationId of Object.keys(operations)) {
      const last = events.indexOf(
        `event: next\ndata: {"id":"${operationId}","payload":{"errors":[{"message":"${message}","extensions":{"code":"UNAUTHENTICATED"}}]}}`,
      );
      expect(last, operationId).toBeGreaterThanOrEqual(0);
      expect(events.indexOf(`event: complete\ndata: {"id":"${operationId}"}`), operationId).toBeGreaterThan(last);
    }
    expect(events.some((e) => e.includes('verificationCompleted'))).toBe(false);
    // Ended: every scheduled end is cancelled, as when they end the stream themselves.
    await waitFor(() => scheduled.slice(before).every((e) => e.cancelled), 20_000, 'the expiries cancelled');
  });

  it('a JWT whose scopes lack cloud:write is refused createProject with FORBIDDEN over WebSocket and SSE, before anything runs', async () => {
    const jwt = await sign(key, {
      exp: Math.floor(clock.now() / 1000) + 600,
      claims: { azp: 'watcher', scope: 'openid mobile-id:read' },
    });
    const CREATE_PROJECT = 'mutation { createProject(input: { name: "not-allowed" }) { project { id } } }';
    const viaWs = collect(ws(jwt), CREATE_PROJECT, {});
    await viaWs.done;
    // graphql-ws reports an operation refused before it runs as the `error` message: the list of errors.
    expect(viaWs.errors[0]).toEqual([
      expect.objectContaining({
        extensions: expect.objectContaining({
          code: 'FORBIDDEN',
          field: 'Mutation.createProject',
          scope: 'cloud:write',
        }),
      }),
    ]);
    const viaSse = sseCollect(sse(jwt), CREATE_PROJECT);
    await viaSse.done;
    expect(viaSse.results).toEqual([
      {
        data: null,
        errors: [
          expect.objectContaining({
            extensions: expect.objectContaining({
              code: 'FORBIDDEN',
              field: 'Mutation.createProject',
              scope: 'cloud:write',
            }),
          }),
        ],
      },
    ]);
    // Nothing ran: the cloud ledger, which every app reads, holds no project of that name.
    const projects = await t.graphql('{ projects { name } }', {}, { key: SHOP_KEY });
    expect(projects.errors).toBeUndefined();
    expect(projects.data!.projects).not.toContainEqual({ name: 'not-allowed' });
  });

  it('a token issued for another app does not read the records of app shop over WebSocket', async () => {
    const id = await registered();
    await sandbox.complete(id);
    const sub = collect(
      ws(await sign(key, { exp: nowSeconds() + 600, claims: { azp: 'crm' } })),
      'query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }',
      { ids: [id] },
    );
    await sub.done;
    expect(sub.results[0].data.verificationResults).toEqual([null]);
  });

  // These move the gateway clock past a token's exp (each token is made from the clock's now). The event arrives after
  // the token expired while the expiry the test holds has not fired: the stream's own check notices it first, and the
  // subscription ends as that end would end it.
  for (const over of ['graphql-ws', 'SSE'] as const) {
    for (const event of ['verification', 'mobile-ID'] as const) {
      it(`a running ${over} subscription whose JWT has expired on the gateway clock is handed no ${event} event that arrives after it, though its scheduled end has not fired: it ends as that end ends it`, async () => {
        const before = scheduled.length;
        const jwt = await token(60);
        const exp = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).exp as number;
        const expired = `the JWT expired at ${new Date(exp * 1000).toISOString()}`;
        let arrive: () => Promise<void>;
        let sub: Collected;
        if (event === 'verification') {
          const id = await registered();
          sub = over === 'SSE' ? sseCollect(sse(jwt), COMPLETED, { id }) : collect(ws(jwt), COMPLETED, { id });
          await waitForSubscribers(t, 'verification', id);
          arrive = () => sandbox.complete(id);
        } else {
          const authReqId = `late-expiry-${over}`;
          const notification = await notificationToken(jwt, authReqId);
          const vars = { id: authReqId };
          sub = over === 'SSE' ? sseCollect(sse(jwt), SUBSCRIPTION, vars) : collect(ws(jwt), SUBSCRIPTION, vars);
          await waitForSubscribers(t, 'mobile-id', authReqId);
          arrive = () => mobileIdResult(notification, authReqId);
        }
        const entry = await nextScheduled(before);
        clock.advance(61_000);
        await arrive();
        await sub.done;
        if (over === 'graphql-ws') {
          // The connection is closed as at the expiry, not the subscription completed.
          expect(sub.completed()).toBe(false);
          expect(sub.results).toEqual([]);
          const closed = sub.errors[0] as { code: number; reason: string };
          expect(closed.code).toBe(4403);
          expect(closed.reason).toBe(`Forbidden: ${expired}; reconnect with a new token`);
        } else {
          expect(sub.errors).toEqual([]);
          expect(sub.completed()).toBe(true);
          expect(sub.results).toEqual([
            {
              errors: [
                {
                  message: `${expired}: the subscription has ended; subscribe again with a new token`,
                  extensions: { code: 'UNAUTHENTICATED' },
                },
              ],
            },
          ]);
        }
        // Ended: the scheduled end is cancelled, as when it ends the stream itself.
        await waitFor(() => entry.cancelled, 20_000, 'the expiry cancelled');
      });
    }
  }

  it('an MCP subscriptions/listen stream whose JWT has expired on the gateway clock is told of no change that arrives after it, though its scheduled end has not fired: the stream ends as that end ends it', async () => {
    const before = scheduled.length;
    const jwt = await token(60);
    const authReqId = 'late-expiry-listen';
    const notification = await notificationToken(jwt, authReqId);
    const mcp = await mcpClient(t, { key: jwt });
    try {
      const told: string[] = [];
      mcp.client.setNotificationHandler('notifications/resources/updated', (n) => void told.push(n.params.uri));
      const listen = await mcp.client.listen({ resourceSubscriptions: [`mobileid://authentications/${authReqId}`] });
      const entry = await nextScheduled(before);
      await waitForSubscribers(t, 'mobile-id', authReqId);
      clock.advance(61_000);
      let closed: string | undefined;
      void listen.closed.then((how) => (closed = how));
      await mobileIdResult(notification, authReqId);
      await waitFor(() => closed, 20_000, 'the listen stream ended');
      expect(closed).toBe('remote');
      expect(told).toEqual([]);
      await waitFor(() => entry.cancelled, 20_000, 'the expiry cancelled');
    } finally {
      await mcp.close();
    }
  });

  // Last in this describe: it moves the gateway clock past a token's exp.
  it('a WebSocket whose JWT has expired on the gateway clock runs nothing more, though its scheduled end has not fired: the next operation closes it 4403 naming the expiry, as SSE and MCP refuse a request with the token', async () => {
    const before = scheduled.length;
    const jwt = await token(60);
    const exp = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).exp as number;
    const client = ws(jwt);
    const open = collect(client, OPEN, {});
    const entry = await nextScheduled(before);
    clock.advance(61_000);
    // The expiry the test holds has not fired: the connection is open, and its token expired a second ago.
    expect(open.completed()).toBe(false);
    const registrations = sandbox.verifications().length;
    const late = collect(client, REGISTER, { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Late' } } });
    await late.done;
    expect(late.results).toEqual([]);
    await open.done;
    const closed = late.errors[0] as { code: number; reason: string };
    expect(closed.code).toBe(4403);
    expect(closed.reason).toBe(
      `Forbidden: the JWT expired at ${new Date(exp * 1000).toISOString()}; reconnect with a new token`,
    );
    expect(sandbox.verifications().length).toBe(registrations);
    // Over SSE the token is refused as it is: the same point on the same clock.
    const res = await request(`${t.url}/graphql/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: OPEN }),
    });
    expect(res.statusCode).toBe(401);
    await res.body.text();
    await waitFor(() => entry.cancelled, 20_000, 'the expiry cancelled');
  });
});

describe('JWTs over WebSocket and SSE while the JWKS cannot be fetched', () => {
  it('a JWT whose keys cannot be fetched closes the WebSocket with 1013 (try again later) and gets 503 UPSTREAM_UNAVAILABLE over SSE', async () => {
    const key = await signingKey('unreachable');
    const jwks = await startJwksServer([key]);
    jwks.down();
    const t = await startJwtGateway(jwks);
    try {
      const jwt = await sign(key);
      const client = wsClient(t, { key: jwt });
      const sub = collect(client, OPEN, {});
      await sub.done;
      expect(sub.errors[0]).toMatchObject({
        code: 1013,
        reason: expect.stringMatching(/^Try again later: the identity provider's keys/),
      });
      await client.dispose();

      const res = await request(`${t.url}/graphql/stream`, {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: OPEN }),
      });
      expect(res.statusCode).toBe(503);
      const body = (await res.body.json()) as { errors: Array<{ message: string; extensions: { code: string } }> };
      expect(body.errors[0]!.extensions.code).toBe('UPSTREAM_UNAVAILABLE');
    } finally {
      await t.close();
      await jwks.stop();
    }
  });
});
