// A reserved SSE stream (graphql-sse's single-connection mode) holds the results of its operations until its GET
// connects it: graphql-sse queues them as fast as its subscriptions yield. They are bounded by SUBSCRIBER_BUFFER_BYTES,
// as a connected stream's unsent bytes are: past it the reservation is released as its minute's end would release it,
// and counted as a slow consumer. The minute is held by the testing hook, so only the bound can release it here.
import http from 'node:http';
import { request } from 'undici';
import { expect, it } from 'vitest';

import { scopeOfApp } from '../../src/auth/caller.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import {
  closedAsSlow,
  completionsOn,
  postCompletion,
  registerVerifications,
  reservedSse,
} from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const start = gatewaysPerTest();

const KEY = 'key-a';
const AUTH = { authorization: `Bearer ${KEY}` };
const TOKEN = 'x-graphql-event-stream-token';
const SUBSCRIPTION = 'subscription { verificationCompleted { payload } }';
const ENV = {
  GATEWAY_API_KEYS: `alpha:${KEY}`,
  SANDBOX_CALLBACK_DELAY_MS: '600000',
  SUBSCRIBER_BUFFER_BYTES: '65536',
  CALLBACK_BODY_KEPT_BYTES: '262144',
  RATE_LIMIT_READS: 'off',
  APP_EVENTS_PER_MINUTE: '0',
  APP_EVENT_BYTES_PER_MINUTE: '0',
};
/** Each event's body: about a third of SUBSCRIBER_BUFFER_BYTES, so that the fourth held passes it. */
const PAD = 'x'.repeat(20_000);

interface Started {
  t: TestGateway;
  /** The callback address of the one verification registered. */
  id: string;
  url: string;
  /** The releases of reservations at their minute's end, scheduled and never run unless a test runs them. */
  releases: Array<() => void>;
}

async function started(): Promise<Started> {
  const releases: Array<() => void> = [];
  const t = await start(ENV, { testing: { scheduleSseRelease: (release) => releases.push(release) } });
  const urls = await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1);
  const [id, url] = [...urls][0]!;
  return { t, id, url, releases };
}

/** Connects the reserved stream (GET): the `n` of each `next` event it receives, read as it comes. */
async function connect(t: TestGateway, token: string): Promise<{ received: string[]; res: http.IncomingMessage }> {
  const res = await reservedSse(t, KEY, SUBSCRIPTION).get(token);
  expect(res.statusCode).toBe(200);
  return { received: completionsOn(res), res };
}

it('a reserved stream not connected is released once the results it holds pass SUBSCRIBER_BUFFER_BYTES, logged and counted', async () => {
  const { t, id, url } = await started();
  const live = () => t.gateway.services.liveSubscriptions.of(scopeOfApp('alpha'));
  const sse = reservedSse(t, KEY, SUBSCRIPTION);
  const token = await sse.reserve();
  await sse.add(token);
  await waitForSubscribers(t, 'verification');
  expect(live()).toBe(1);

  // Nothing connects the stream, and its minute never ends here: only the bound stops what it holds from growing.
  let posted = 0;
  while (posted < 40 && (await closedAsSlow(t)) === undefined) await postCompletion(url, id, `held-${posted++}`, PAD);
  expect(await closedAsSlow(t)).toBe('1');
  expect(posted).toBeLessThanOrEqual(6);
  expect(t.logs().split('releasing a reserved SSE stream not connected').length - 1).toBe(1);

  // Released as at its minute's end: its subscription gives back its place, and its token names no stream any more.
  await waitFor(() => live() === 0, 20_000, 'the released stream’s subscription to give back its place');
  await waitFor(() => t.gateway.services.events.bus.subscribers('verification') === 0, 20_000, 'its source to end');
  const get = await request(`${t.url}/graphql/stream`, {
    headers: { ...AUTH, accept: 'text/event-stream', [TOKEN]: token },
  });
  expect(get.statusCode).toBe(404);
  expect(((await get.body.json()) as any).errors[0].extensions.code).toBe('NOT_FOUND');
  // Counted once, and logged once.
  await postCompletion(url, id, 'after-release', PAD);
  expect(await closedAsSlow(t)).toBe('1');
}, 60_000);

it('a reserved stream gets what it held under the bound when it connects, and once connected is bounded only by what its client leaves unread', async () => {
  const { t, id, url } = await started();
  const sse = reservedSse(t, KEY, SUBSCRIPTION);
  const token = await sse.reserve();
  await sse.add(token);
  await waitForSubscribers(t, 'verification');

  // Two events held (under the bound), then the stream connects and gets them.
  const posted = ['before-0', 'before-1'];
  for (const n of posted) await postCompletion(url, id, n, PAD);
  const stream = await connect(t, token);
  await waitFor(() => stream.received.length === 2, 20_000, 'the events held before the stream connected');

  // Connected and read, far more than SUBSCRIBER_BUFFER_BYTES in all passes through: the held bytes no longer count.
  for (let i = 0; i < 8; i++) {
    posted.push(`after-${i}`);
    await postCompletion(url, id, `after-${i}`, PAD);
  }
  await waitFor(() => stream.received.length === posted.length, 20_000, 'every event after the stream connected');
  expect(stream.received).toEqual(posted);
  expect(await closedAsSlow(t)).toBeUndefined();
  stream.res.destroy();
}, 60_000);
