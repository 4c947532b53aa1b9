// A wait_for_events call made with a JWT ends when the token expires, by the one expiry rule of graphql-ws, SSE and
// subscriptions/listen (src/auth/jwt.ts onExpiry, on the gateway's clock and scheduler): the call answers
// UNAUTHENTICATED with the cursor to resume from, and no event logged after the expiry is handed out with the token.
// The test holds the scheduler, so nothing waits on a clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../../helpers/gateway.js';
import {
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  testClock,
  type JwksServer,
  type SigningKey,
} from '../../helpers/jwt.js';
import { mcpClientsPerTest, type TestMcpClient } from '../../helpers/mcp.js';
import { postNotification } from '../../helpers/mobile-id.js';
import { subscribers, waitFor } from '../../helpers/wait.js';

const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;

interface Scheduled {
  delay: number;
  expire: () => void;
  cancelled: boolean;
}

const connect = mcpClientsPerTest();
const clock = testClock();
const scheduled: Scheduled[] = [];
let key: SigningKey;
let jwks: JwksServer;
let gw: TestGateway;
beforeAll(async () => {
  key = await signingKey('k1');
  jwks = await startJwksServer([key]);
  gw = await startJwtGateway(
    jwks,
    {},
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
});
afterAll(async () => {
  await gw?.close();
  await jwks?.stop();
});

/** A token of app shop that expires `seconds` after the test clock's now, and its exp (epoch ms). */
async function token(seconds: number): Promise<{ jwt: string; expMs: number }> {
  const exp = Math.floor(clock.now() / 1000) + seconds;
  return { jwt: await sign(key, { exp }), expMs: exp * 1000 };
}

/** The mobile identity service reports the end of `authReqId` on a token app shop issued: an event of that app. */
async function mobileIdResult(bearer: string, authReqId: string): Promise<void> {
  const issued = await gw.graphql(ISSUE, { id: authReqId }, { key: bearer });
  expect(issued.errors).toBeUndefined();
  const notificationToken = (issued.data!.issueMobileIdNotificationToken as { token: string }).token;
  const { body } = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(gw, body, { token: notificationToken })).status).toBe(204);
}

/** The cursor of now, for `c`'s app. */
async function now(c: TestMcpClient): Promise<string> {
  const start = await c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
  return start.structuredContent!.cursor as string;
}

/** The expiry scheduled after the first `from`. */
const nextScheduled = (from: number) =>
  waitFor(() => scheduled.length > from && scheduled[scheduled.length - 1], 20_000, 'the expiry scheduled');

const keys = (result: Awaited<ReturnType<TestMcpClient['call']>>) =>
  (result.structuredContent!.events as { key: string }[]).map((e) => e.key);

describe('wait_for_events with a JWT', () => {
  // Scheduled exp − now after it began; the event logged after the expiry is read with a new token only.
  it('ends at the expiry: UNAUTHENTICATED naming it, with the cursor to resume from', async () => {
    const { jwt, expMs } = await token(900);
    const c = await connect(gw, { key: jwt });
    const cursor = await now(c);

    const before = scheduled.length;
    const waiting = c.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    const entry = await nextScheduled(before);
    expect(entry.delay).toBe(expMs - clock.now());
    entry.expire();
    const ended = await waiting;

    const message = `the JWT expired at ${new Date(expMs).toISOString()} while waiting; nothing after it was read`;
    const resume = ended.structuredContent?.cursor as string;
    expect(ended.isError).toBe(true);
    expect(ended.structuredContent).toEqual({
      errors: [{ message, code: 'UNAUTHENTICATED' }],
      cursor: expect.any(String),
    });
    expect(ended.content).toEqual([
      {
        type: 'text',
        text: `Unauthenticated: ${message}. Call again with a new token and the cursor ${resume}: no event is missed`,
      },
    ]);
    expect(entry.cancelled).toBe(true);

    // Logged after the expiry: read with a new token from the cursor the ended wait gave, and from the first one.
    await mobileIdResult(jwt, 'after-expiry');
    const renewed = await connect(gw, { key: (await token(900)).jwt });
    for (const from of [resume, cursor]) {
      const read = await renewed.call('wait_for_events', { cursor: from, kinds: ['mobile-id'], timeoutSeconds: 0 });
      expect(keys(read)).toEqual(['after-expiry']);
    }
  });

  it('answers the events logged before the expiry as usual, even when it fires during the call', async () => {
    const { jwt } = await token(900);
    const c = await connect(gw, { key: jwt });
    const cursor = await now(c);
    await mobileIdResult(jwt, 'before-expiry');

    const before = scheduled.length;
    const waiting = c.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    const entry = await nextScheduled(before);
    entry.expire();
    const got = await waiting;
    expect(got.isError).toBeFalsy();
    expect(keys(got)).toEqual(['before-expiry']);
    expect(got.structuredContent!.timedOut).toBe(false);
  });

  it('returns an event logged while it waits, and cancels its expiry', async () => {
    const { jwt } = await token(900);
    const c = await connect(gw, { key: jwt });
    const cursor = await now(c);

    const before = scheduled.length;
    const waiting = c.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    const entry = await nextScheduled(before);
    await mobileIdResult(jwt, 'while-waiting');
    const got = await waiting;
    expect(keys(got)).toEqual(['while-waiting']);
    expect(entry.cancelled).toBe(true);
  });

  // Moves the gateway clock past a token's exp (each token is made from the clock's now).
  it('hands out no event logged after the expiry though its scheduled end has not fired: UNAUTHENTICATED with the cursor, from which a new token reads it', async () => {
    const { jwt, expMs } = await token(60);
    const c = await connect(gw, { key: jwt });
    const cursor = await now(c);

    const before = scheduled.length;
    const waiting = c.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    const entry = await nextScheduled(before);
    await waitFor(() => subscribers(gw, 'mobile-id', null) > 0, 20_000, 'the wait listening');
    clock.advance(61_000);
    // The expiry the test holds has not fired; the event is logged after the token expired.
    const renewed = (await token(900)).jwt;
    await mobileIdResult(renewed, 'after-late-expiry');
    const ended = await waiting;

    const message = `the JWT expired at ${new Date(expMs).toISOString()} while waiting; nothing after it was read`;
    expect(ended.isError).toBe(true);
    expect(ended.structuredContent).toEqual({
      errors: [{ message, code: 'UNAUTHENTICATED' }],
      cursor: expect.any(String),
    });
    expect(entry.cancelled).toBe(true);
    const c2 = await connect(gw, { key: renewed });
    const read = await c2.call('wait_for_events', {
      cursor: ended.structuredContent!.cursor,
      kinds: ['mobile-id'],
      timeoutSeconds: 0,
    });
    expect(keys(read)).toEqual(['after-late-expiry']);
  });
});
