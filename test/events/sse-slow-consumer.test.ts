// A slow consumer over SSE: graphql-sse asks a subscription for its next result as soon as it has one, whatever the
// client reads, and queues the results for the stream's writer, which wrote them one at a time at the client's pace: a
// client that stopped reading had every later result held in the gateway's memory, without bound. It is closed
// instead, as a WebSocket subscriber is at SUBSCRIBER_BUFFER_BYTES: the events it received carry their ids, and a
// resume with Last-Event-ID from the last one loses nothing.
import http from 'node:http';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { scopeOfApp } from '../../src/auth/caller.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import {
  closedAsSlow,
  noWildcardListener,
  postCompletion,
  registerVerifications,
  sseEvents,
} from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const KEY = 'key-a';
const SUBSCRIPTION = 'subscription { verificationCompleted { payload } }';

interface Opened {
  res: http.IncomingMessage;
  /** Each `next` event received: its id and the `n` of its body. */
  received: { id: string; n: string }[];
  /** Resolves when the response has ended or closed. */
  ended: Promise<void>;
}

describe('a slow SSE subscriber', () => {
  let t: TestGateway;
  let urls: Map<string, string>;

  beforeAll(async () => {
    t = await startTestGateway({
      GATEWAY_API_KEYS: `alpha:${KEY}`,
      SANDBOX_CALLBACK_DELAY_MS: '600000',
      SUBSCRIBER_BUFFER_BYTES: '65536',
      CALLBACK_BODY_KEPT_BYTES: '262144',
      RATE_LIMIT_READS: 'off',
      APP_EVENTS_PER_MINUTE: '0',
      APP_EVENT_BYTES_PER_MINUTE: '0',
    });
    urls = await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1);
  });
  afterAll(async () => {
    await t.close();
  });

  /** The subscription over a distinct SSE stream (its own connection), with Last-Event-ID when given. */
  async function open(lastEventId?: string): Promise<Opened> {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(`${t.url}/graphql/stream`, {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${KEY}`,
          'content-type': 'application/json',
          accept: 'text/event-stream',
          ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
        },
      });
      req.on('response', resolve);
      req.on('error', reject);
      req.end(JSON.stringify({ query: SUBSCRIPTION }));
    });
    expect(res.statusCode).toBe(200);
    const received: Opened['received'] = [];
    res.setEncoding('utf8');
    res.on(
      'data',
      sseEvents((e) => {
        if (e.event === 'next') received.push({ id: e.id!, n: e.data.data.verificationCompleted.payload.n });
      }),
    );
    const ended = new Promise<void>((resolve) => {
      res.on('end', resolve);
      res.on('close', resolve);
      res.on('error', () => resolve());
    });
    return { res, received, ended };
  }

  it('is closed past SUBSCRIBER_BUFFER_BYTES unsent rather than buffered without bound, counted, and resumes from its last id losing nothing', async () => {
    const [id] = [...urls.keys()];
    const url = urls.get(id!)!;
    await noWildcardListener(t, 'verification');
    const slow = await open();
    await waitForSubscribers(t, 'verification');

    // The client stops reading; large events fill the kernel's buffers, then the gateway's.
    slow.res.pause();
    const posted: string[] = [];
    const pad = 'x'.repeat(200_000);
    for (let i = 0; i < 200 && (await closedAsSlow(t)) === undefined; i++) {
      posted.push(`slow-${i}`);
      await postCompletion(url, id!, `slow-${i}`, pad);
    }
    expect(await closedAsSlow(t)).toBe('1');
    expect(t.logs()).toContain('closing a slow SSE subscriber');
    slow.res.resume();
    await slow.ended;
    expect(slow.received.length).toBeLessThan(posted.length);
    // Closed as slow, it is no longer one of its app's live subscriptions (APP_LIVE_SUBSCRIPTIONS).
    await waitFor(
      () => t.gateway.services.liveSubscriptions.of(scopeOfApp('alpha')) === 0,
      20_000,
      'no live subscription left after the slow consumer was closed',
    );

    // What an EventSource does: it connects again with the last id it received, and gets the rest, in order, once.
    const resumed = await open(slow.received[slow.received.length - 1]?.id);
    await waitFor(
      () => slow.received.length + resumed.received.length === posted.length,
      30_000,
      'the rest after the last id',
    );
    expect([...slow.received, ...resumed.received].map((e) => e.n)).toEqual(posted);
    resumed.res.destroy();
  }, 120_000);
});
