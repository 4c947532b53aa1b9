// A subscription added to a reserved stream (graphql-sse's single-connection mode) while it is still being set up,
// whose stream is gone by the time it is ready: stopped by DELETE, the stream's connection closed, or the reservation
// released unconnected. Nothing will ever carry its results, so it ends there and gives back its place under
// APP_LIVE_SUBSCRIPTIONS; otherwise the app would be refused every new subscription until a restart. The setup is held
// at the rate limiter's take (which reads the database in production), so the stop or close lands inside it every run.
import { request } from 'undici';
import { afterEach, expect, it, vi } from 'vitest';

import { scopeOfApp } from '../../src/auth/caller.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { SUBSCRIPTION } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
afterEach(() => {
  vi.restoreAllMocks();
});

const AUTH = { authorization: 'Bearer key-a' };
const TOKEN = 'x-graphql-event-stream-token';
const ENV = { GATEWAY_API_KEYS: 'alpha:key-a', APP_LIVE_SUBSCRIPTIONS: '1', RATE_LIMIT_READS: '1000/1m' };

/** The next operation's setup waits at the rate limiter's take until `release`; `entered` resolves once it is there. */
function holdSetup(gw: TestGateway): { entered: Promise<void>; release: () => void } {
  const limits = gw.gateway.services.rateLimits;
  const take = limits.take.bind(limits);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let entered!: () => void;
  const there = new Promise<void>((r) => (entered = r));
  vi.spyOn(limits, 'take').mockImplementationOnce(async (...args) => {
    entered();
    await gate;
    return take(...args);
  });
  return { entered: there, release };
}

async function reserve(gw: TestGateway): Promise<string> {
  const put = await request(`${gw.url}/graphql/stream`, { method: 'PUT', headers: { ...AUTH, accept: 'text/plain' } });
  expect(put.statusCode).toBe(201);
  return put.body.text();
}

function addSubscription(gw: TestGateway, token: string, id: string) {
  return request(`${gw.url}/graphql/stream`, {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json', accept: 'application/json', [TOKEN]: token },
    body: JSON.stringify({ query: SUBSCRIPTION, variables: { id }, extensions: { operationId: 'op1' } }),
  });
}

/** Resolves once the reserved stream is gone: its token names no stream any more. */
async function streamGone(gw: TestGateway, token: string): Promise<void> {
  await waitFor(
    async () => {
      const probe = await request(`${gw.url}/graphql/stream`, {
        method: 'POST',
        headers: { ...AUTH, 'content-type': 'application/json', accept: 'application/json', [TOKEN]: token },
        body: JSON.stringify({ query: '{ __typename }', extensions: { operationId: 'probe' } }),
      });
      await probe.body.text();
      return probe.statusCode === 404;
    },
    20_000,
    'the reserved stream to be gone',
  );
}

/** An app's subscription over a distinct event stream: its first event, or a refusal. */
async function subscribeAgain(gw: TestGateway, id: string, abort: AbortController): Promise<number> {
  const res = await request(`${gw.url}/graphql/stream`, {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ query: SUBSCRIPTION, variables: { id } }),
    signal: abort.signal,
  });
  expect(res.statusCode).toBe(200);
  await waitFor(() => subscribers(gw, 'mobile-id', id) === 1, 20_000, 'the new subscription');
  return gw.gateway.services.liveSubscriptions.of(scopeOfApp('alpha'));
}

it('a subscription stopped by DELETE while it is set up ends, and the app may subscribe again', async () => {
  const gw = await start(ENV);
  const live = () => gw.gateway.services.liveSubscriptions.of(scopeOfApp('alpha'));
  const token = await reserve(gw);
  const setup = holdSetup(gw);
  const posted = addSubscription(gw, token, 'deleted-in-setup');
  await setup.entered;
  expect(live()).toBe(1);

  const del = await request(`${gw.url}/graphql/stream?operationId=op1`, {
    method: 'DELETE',
    headers: { ...AUTH, [TOKEN]: token },
  });
  await del.body.text();
  expect(del.statusCode).toBe(200);
  setup.release();
  const answer = await posted;
  await answer.body.text();
  // graphql-sse's answer for an operation stopped before it was ready.
  expect(answer.statusCode).toBe(204);

  await waitFor(() => live() === 0, 20_000, 'the stopped subscription to give back its place');
  expect(subscribers(gw, 'mobile-id', 'deleted-in-setup')).toBe(0);
  const abort = new AbortController();
  expect(await subscribeAgain(gw, 'after-delete', abort)).toBe(1);
  abort.abort();
});

it('a subscription whose reserved stream closes while it is set up ends, and the app may subscribe again', async () => {
  const gw = await start(ENV);
  const live = () => gw.gateway.services.liveSubscriptions.of(scopeOfApp('alpha'));
  const token = await reserve(gw);
  const connection = new AbortController();
  const connected = await request(`${gw.url}/graphql/stream`, {
    headers: { ...AUTH, accept: 'text/event-stream', [TOKEN]: token },
    signal: connection.signal,
  });
  expect(connected.statusCode).toBe(200);
  const setup = holdSetup(gw);
  const posted = addSubscription(gw, token, 'closed-in-setup');
  await setup.entered;
  expect(live()).toBe(1);

  connection.abort();
  await streamGone(gw, token);
  setup.release();
  const answer = await posted;
  await answer.body.text();

  await waitFor(() => live() === 0, 20_000, 'the subscription of the closed stream to give back its place');
  await waitFor(() => subscribers(gw, 'mobile-id', 'closed-in-setup') === 0, 20_000, 'its source to end');
  const abort = new AbortController();
  expect(await subscribeAgain(gw, 'after-close', abort)).toBe(1);
  abort.abort();
});

it('a subscription whose reserved stream is released unconnected while it is set up ends', async () => {
  const releases: Array<() => void> = [];
  const gw = await start(ENV, { testing: { scheduleSseRelease: (release) => releases.push(release) } });
  const live = () => gw.gateway.services.liveSubscriptions.of(scopeOfApp('alpha'));
  const token = await reserve(gw);
  const setup = holdSetup(gw);
  const posted = addSubscription(gw, token, 'released-in-setup');
  await setup.entered;
  expect(live()).toBe(1);

  // The reservation times out before anything connects it.
  releases[0]!();
  await streamGone(gw, token);
  setup.release();
  const answer = await posted;
  await answer.body.text();

  await waitFor(() => live() === 0, 20_000, 'the subscription of the released stream to give back its place');
  await waitFor(() => subscribers(gw, 'mobile-id', 'released-in-setup') === 0, 20_000, 'its source to end');
});
