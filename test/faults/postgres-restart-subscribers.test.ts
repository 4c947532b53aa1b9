import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { cursorNow, deliveredEverywhere, registerVerifications, RESUME } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

/** What a client that does not retry saw of its socket: the close code and reason, or the socket's error. */
interface Seen {
  events: { n: string; cursor: string }[];
  ended: { code?: number; reason?: string; error?: string } | null;
}

/** A graphql-ws client with no retries (as a new user's first try), resuming after `cursor` on `gw`. */
function subscriber(gw: TestGateway, cursor: string, seen: Seen): () => Promise<void> {
  const client = createClient({
    url: `${gw.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    // Pings of its own, as graphql-ws's docs advise, so that a silent connection would be noticed.
    keepAlive: 2_000,
    connectionParams: { authorization: 'Bearer key-a' },
    on: {
      closed: (event) => {
        const e = event as { code?: number; reason?: string };
        seen.ended ??= { code: e.code, reason: String(e.reason ?? '') };
      },
      error: (err) => {
        seen.ended ??= { error: String((err as Error)?.message ?? err) };
      },
    },
  });
  client.subscribe(
    { query: RESUME, variables: { after: cursor } },
    {
      next: (value) => {
        if (value.data)
          seen.events.push({
            n: (value.data as any).verificationCompleted.payload.n,
            cursor: (value.extensions as { cursor: string }).cursor,
          });
        if (value.errors) seen.ended ??= { error: JSON.stringify(value.errors) };
      },
      error: (err) => {
        seen.ended ??= { error: String((err as Error)?.message ?? JSON.stringify(err)) };
      },
      complete: () => undefined,
    },
  );
  return async () => {
    await client.dispose();
  };
  // (the dispose function returns a promise; kept apart from the waitFor conditions)
}

/** A graphql-ws client (no retries) waiting for one verification's result: the stored one first, read from the log. */
function oneVerification(gw: TestGateway, externalId: string, seen: Seen): () => Promise<void> {
  const client = createClient({
    url: `${gw.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    connectionParams: { authorization: 'Bearer key-a' },
    on: {
      closed: (event) =>
        void (seen.ended ??= {
          code: (event as { code?: number }).code,
          reason: String((event as { reason?: string }).reason ?? ''),
        }),
    },
  });
  client.subscribe(
    {
      query: 'subscription One($id: ID) { verificationCompleted(externalId: $id) { payload } }',
      variables: { id: externalId },
    },
    {
      next: (value) => {
        if (value.data)
          seen.events.push({
            n: (value.data as any).verificationCompleted.payload.n,
            cursor: (value.extensions as { cursor: string }).cursor,
          });
        if (value.errors) seen.ended ??= { error: JSON.stringify(value.errors) };
      },
      error: (err) => void (seen.ended ??= { error: String((err as Error)?.message ?? JSON.stringify(err)) }),
      complete: () => undefined,
    },
  );
  return async () => {
    await client.dispose();
  };
}

describe('subscribers while PostgreSQL restarts', () => {
  let pg: TestPostgres;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    pg = await startPostgres();
    const shared = {
      DATABASE_URL: await pg.createDatabase('restarts'),
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      GATEWAY_API_KEYS: 'key-a',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
    };
    a = await startTestGateway(shared);
    b = await startTestGateway(shared);
  }, 120_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await pg?.stop();
  });

  it('a subscriber on B keeps its socket through three PostgreSQL restarts (or is told to reconnect with 1012/1013) and gets every acknowledged event once, in order', async () => {
    const [id, url] = [...(await registerVerifications(a, a.gateway.sandbox.verification!, 'key-a', 1))][0]!;
    // The reads of B's event log that failed, counted as they fail (the streams hold this same log).
    const failedReads = { range: 0, latest: 0 };
    const log = b.gateway.services.events.log as unknown as Record<
      'range' | 'latest',
      (...args: unknown[]) => Promise<unknown>
    >;
    for (const name of ['range', 'latest'] as const) {
      const original = log[name]!.bind(log);
      log[name] = (...args: unknown[]) =>
        original(...args).catch((err: unknown) => {
          failedReads[name] += 1;
          throw err;
        });
    }
    const acknowledged: string[] = [];
    const got: { n: string; cursor: string }[] = [];
    const endings: NonNullable<Seen['ended']>[] = [];
    let cursor = cursorNow(b);
    let seen: Seen = { events: [], ended: null };
    let dispose = subscriber(b, cursor, seen);
    const oneSeen: Seen = { events: [], ended: null };
    let one = async (): Promise<void> => undefined;
    let sending = true;
    let refused = 0;
    const sender = (async () => {
      for (let i = 0; sending || i < 3; i++) {
        const n = `r${i}`;
        for (;;) {
          const res = await request(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ verificationExternalId: id, status: 'COMPLETED', n }),
          }).catch(() => null);
          await res?.body.text();
          if (res?.statusCode === 204 || res?.statusCode === 200) break;
          refused += 1;
          await sleep(50);
        }
        acknowledged.push(n);
        await sleep(20);
      }
    })();
    /** A subscriber that was told to reconnect does, after its last cursor: a client that retries would. */
    const reconnectIfTold = async () => {
      if (seen.ended === null) return;
      endings.push(seen.ended);
      await dispose();
      got.push(...seen.events);
      if (seen.events.length) cursor = seen.events[seen.events.length - 1]!.cursor;
      // Only a code that tells a graphql-ws client to reconnect is acceptable.
      expect(seen.ended.code === 1012 || seen.ended.code === 1013, JSON.stringify(seen.ended)).toBe(true);
      seen = { events: [], ended: null };
      dispose = subscriber(b, cursor, seen);
    };
    for (let restart = 0; restart < 3; restart++) {
      const before = refused;
      if (restart === 1) {
        // The second time, the subscriber leaves before PostgreSQL stops and comes back while it is down, having
        // missed events: its replay cannot read the log yet. A subscriber to one verification starts then too.
        await dispose();
        got.push(...seen.events);
        if (seen.events.length) cursor = seen.events[seen.events.length - 1]!.cursor;
        seen = { events: [], ended: null };
        const missed = acknowledged.length + 2;
        await waitFor(() => acknowledged.length >= missed, 30_000, 'events acknowledged while the subscriber is away');
        // B has delivered them before PostgreSQL stops, so the subscriber that comes back has them to replay from the
        // log (one still on its way to B would come live once PostgreSQL is back, and nothing would read the log).
        await deliveredEverywhere(b);
      }
      await pg.restart({
        whileStopped: async () => {
          await waitFor(() => refused > before, 30_000, 'a webhook refused while PostgreSQL is down');
          if (restart !== 1) return;
          dispose = subscriber(b, cursor, seen);
          one = oneVerification(b, id, oneSeen);
          // Both read the log while PostgreSQL is down, and fail (the pool's connection attempts are refused). Before
          // streams retried their reads, both ended here with INTERNAL_SERVER_ERROR.
          const at = { ...failedReads };
          await waitFor(
            () => failedReads.range > at.range && failedReads.latest > at.latest,
            30_000,
            'both subscribers’ reads failed while PostgreSQL is down',
          );
        },
      });
      // Events acknowledged after the restart reach B before the next one.
      const target = acknowledged.length + 2;
      await waitFor(
        async () => {
          await reconnectIfTold();
          return got.length + seen.events.length >= target;
        },
        60_000,
        `restart ${restart}: the events acknowledged since`,
      );
    }
    sending = false;
    await sender;
    await waitFor(
      async () => {
        await reconnectIfTold();
        return got.length + seen.events.length >= acknowledged.length;
      },
      60_000,
      'every acknowledged event',
    );
    await reconnectIfTold();
    await dispose();
    got.push(...seen.events);
    expect(got.map((e) => e.n)).toEqual(acknowledged);
    // The subscriber to one verification got its stored result (the newest when it started) and then live ones, with no error.
    await waitFor(
      () => oneSeen.events.at(-1)?.n === acknowledged.at(-1) || oneSeen.ended !== null,
      60_000,
      'the last result on the one-verification subscriber',
    );
    await one();
    expect(oneSeen.ended).toBeNull();
    expect(oneSeen.events.map((e) => e.n)).toEqual(acknowledged.slice(acknowledged.length - oneSeen.events.length));
    console.log(
      `postgres restarts: ${acknowledged.length} events, ${refused} refusals, subscriber endings: ${JSON.stringify(endings)}`,
    );
  }, 300_000);
});
