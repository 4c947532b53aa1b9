// An event is purged by the expiry stamped on it when it was stored, under the EVENT_RETENTION of that time; a cursor
// is dated. Once the operator raises EVENT_RETENTION, a cursor young enough for the new retention may still lie
// before events purged under the old one: it is refused `expired`, as an old cursor is, over graphql-ws, SSE
// (Last-Event-ID) and MCP wait_for_events, never accepted with a silent gap. The stream's replay finds it (it reads
// the purge's watermark with its first page), and the answer is the one a cursor past EVENT_RETENTION gets, word for
// word but for the reason. A cursor at or past what the purge deleted still resumes with nothing missed, the watermark
// read once for the resume, not per event. SQLite on disk, the gateway restarted on the same DATA_DIR, the testing
// clock, the purge run by hand.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { mcpClient } from '../helpers/mcp.js';
import {
  cursorNow,
  mcpCursorResumes,
  postCompletion,
  registerVerifications,
  reservedSse,
  RESUME,
  resumesFromALiveCursor,
  resumeWs,
  sseEvents,
  type SseEvent,
} from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const KEY = 'key-purge-watermark-0123456789';
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** Every message of the one subscription a raw graphql-transport-ws client resumed after `cursor`, to its end. */
async function wsAnswer(t: TestGateway, cursor: string): Promise<any[]> {
  const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  const messages: any[] = [];
  const completed = new Promise<void>((resolve, reject) => {
    ws.on('message', (data) => {
      const m = JSON.parse(String(data));
      if (m.type === 'connection_ack')
        ws.send(
          JSON.stringify({ id: '1', type: 'subscribe', payload: { query: RESUME, variables: { after: cursor } } }),
        );
      else messages.push(m);
      if (m.id === '1' && (m.type === 'complete' || m.type === 'error')) resolve();
    });
    ws.once('error', reject);
    ws.once('close', (code) => reject(new Error(`closed ${code} before the subscription ended`)));
  });
  ws.once('open', () =>
    ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${KEY}` } })),
  );
  try {
    await completed;
  } finally {
    ws.removeAllListeners('close');
    ws.close();
  }
  return messages;
}

/** The first event of an SSE subscription (distinct connection) resumed from `cursor` sent as Last-Event-ID. */
async function sseFirstEvent(t: TestGateway, cursor: string): Promise<string> {
  const res = await request(`${t.url}/graphql/stream`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${KEY}`,
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'last-event-id': cursor,
    },
    body: JSON.stringify({ query: 'subscription { verificationCompleted { externalId } }' }),
  });
  let text = '';
  for await (const chunk of res.body) {
    text += String(chunk);
    // The first event, whole: its `complete` follows it.
    if (/^event: complete$/m.test(text)) break;
  }
  res.body.destroy();
  return text;
}

/** An answer with its words taken out (each error's message, an MCP tool error's text): the rest must be the same. */
const withoutMessages = (answer: unknown): unknown =>
  JSON.parse(JSON.stringify(answer), (key, value) => (key === 'message' || key === 'text' ? '(words)' : value));

/** The read points the app has spent (`gateway_rate_limit_points_total`): allowed, less those given back. */
async function readsSpent(t: TestGateway): Promise<number> {
  const text = await (await request(`${t.url}/metrics`)).body.text();
  const points = (outcome: string) => {
    const m = new RegExp(
      `^gateway_rate_limit_points_total\\{app="purge",bucket="reads",outcome="${outcome}"\\} (\\d+)$`,
      'm',
    ).exec(text);
    return m ? Number(m[1]) : 0;
  };
  return points('allowed') - points('refunded');
}

describe('a cursor before events the retention purge deleted, after EVENT_RETENTION was raised', () => {
  const clock = testClock();
  const dataDir = tempDataDir('purge-watermark-');
  const runs = new Map<string, () => void>();
  let t: TestGateway | undefined;
  /** Taken before the two purged events. */
  let before: string;
  /** The cursor of the first purged event: the second one, after it, is gone. */
  let mid: string;
  /** The cursor `before`'s position, dated past today's EVENT_RETENTION: the refusal a purged one must match. */
  let old: string;
  /** The cursor of the second purged event: every number up to the highest one purged. */
  let atPurged: string;
  let upgraded: { id: string; url: string };

  const start = (retention: string) =>
    startTestGateway(
      {
        DATA_DIR: dataDir,
        GATEWAY_API_KEYS: `purge:${KEY}`,
        EVENT_RETENTION: retention,
        SANDBOX_CALLBACK_DELAY_MS: '600000',
        RATE_LIMIT_READS: '1000/1h',
      },
      {
        testing: {
          clock: clock.now,
          scheduleJob: (name, run) => {
            runs.set(name, run);
            return () => undefined;
          },
        },
      },
    );

  const stored = async (gw: TestGateway) =>
    Number(
      (
        await gw.gateway.services.store.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('kind', '=', VERIFICATION_EVENT_KIND)
          .executeTakeFirstOrThrow()
      ).n,
    );

  beforeAll(async () => {
    t = await start('1h');
    const [id, url] = [...(await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1))][0]!;
    before = cursorNow(t);
    const live = await resumeWs(t, KEY, null);
    await waitForSubscribers(t, VERIFICATION_EVENT_KIND);
    await postCompletion(url, id, 'p1');
    await postCompletion(url, id, 'p2');
    await waitFor(() => live.events.length === 2, 20_000, 'the two events, live');
    mid = live.events[0]!.cursor;
    atPurged = live.events[1]!.cursor;
    old = t.gateway.services.events.cursors.encode(
      t.gateway.services.events.cursors.decode(before, Infinity).position,
      clock.now() - 8 * DAY_MS,
    );
    await live.close();

    // An hour and a minute later, the purge (run by hand) deletes both under the retention they were stored with.
    clock.advance(HOUR_MS + 60_000);
    runs.get('purge expired events')!();
    const first = t;
    await waitFor(async () => (await stored(first)) === 0, 20_000, 'both events purged');
    await t.close();

    // The operator raises the retention: both cursors are young enough for it.
    t = await start('7d');
    // The callback address names the first gateway's port; the path is what identifies it.
    upgraded = { id, url: `${t.url}${new URL(url).pathname}` };
  }, 60_000);

  afterAll(() => t?.close());

  // The log is empty and this replica started after the purge: it has delivered nothing, and the cursor is past all
  // it would replay. The purge is checked all the same, or the stream would wait for live events past the gap.
  it('is refused as expired over graphql-ws when the replica has nothing after it to replay', async () => {
    const sub = await resumeWs(t!, KEY, mid);
    await waitFor(() => sub.errors.length > 0 || sub.events.length > 0, 20_000, 'the refusal');
    await sub.close();
    expect(sub.errors[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'expired', retentionMs: 7 * DAY_MS },
    });
  });

  describe('once an event is logged after the purge', () => {
    beforeAll(() => postCompletion(upgraded.url, upgraded.id, 'p3'));

    it('is refused as expired over graphql-ws', async () => {
      const sub = await resumeWs(t!, KEY, before);
      await waitFor(() => sub.errors.length > 0 || sub.events.length > 0, 20_000, 'the refusal or a replay');
      await sub.close();
      expect(sub.events.map((e) => e.n)).toEqual([]);
      expect(sub.errors[0]).toMatchObject({
        extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'expired', retentionMs: 7 * DAY_MS },
      });
      expect(sub.errors[0].message).toContain('retention purge has deleted');
    });

    it('is answered over graphql-ws as a cursor past EVENT_RETENTION is, but for its words', async () => {
      const purged = await wsAnswer(t!, before);
      const expired = await wsAnswer(t!, old);
      expect(expired[0].payload.errors[0].message).toContain('EVENT_RETENTION');
      expect(purged[0].payload.errors[0].message).toMatch(/^after: .*retention purge has deleted/);
      // Its one result, errors alone (no `data`), then `complete`: as the protocol answers a refused subscribe.
      expect(purged.map((m) => m.type)).toEqual(['next', 'complete']);
      expect(purged[0].payload).not.toHaveProperty('data');
      expect(withoutMessages(purged)).toEqual(withoutMessages(expired));
    });

    it('is refused over SSE as Last-Event-ID as a cursor past EVENT_RETENTION is, but for its words', async () => {
      const purged = await sseFirstEvent(t!, before);
      const expired = await sseFirstEvent(t!, old);
      const data = (text: string) => JSON.parse(/^data: (\{.*)$/m.exec(text)![1]!);
      expect(data(purged).errors[0]).toMatchObject({
        message: expect.stringMatching(/^Last-Event-ID: .*retention purge has deleted/),
        extensions: { code: 'BAD_USER_INPUT', field: 'Last-Event-ID', reason: 'expired', retentionMs: 7 * DAY_MS },
      });
      const shape = (text: string) =>
        text.replace(
          /^data: (\{.*)$/gm,
          (_line, json: string) => `data: ${JSON.stringify(withoutMessages(JSON.parse(json)))}`,
        );
      expect(shape(purged)).toBe(shape(expired));
    });

    it('is refused as expired by MCP wait_for_events', async () => {
      const mcp = await mcpClient(t!, { key: KEY });
      try {
        const spent = await readsSpent(t!);
        const result = await mcp.call('wait_for_events', { cursor: before, timeoutSeconds: 0 });
        expect(result.structuredContent).toMatchObject({
          errors: [{ code: 'BAD_USER_INPUT', argument: 'cursor', reason: 'expired' }],
        });
        expect(result.isError).toBe(true);
        // As a cursor past EVENT_RETENTION: the same answer but for its words, and no point of the reads budget spent.
        expect(await readsSpent(t!)).toBe(spent);
        const expired = await mcp.call('wait_for_events', { cursor: old, timeoutSeconds: 0 });
        expect(withoutMessages(result)).toEqual(withoutMessages(expired));
        expect(await readsSpent(t!)).toBe(spent);
      } finally {
        await mcp.close();
      }
    });

    it('resumes from the cursor of the last purged event with nothing missed, replayed then live', async () => {
      // The watermark's reads, counted: one for the resume, none per event.
      const log = t!.gateway.services.events.log;
      const purgedThrough = log.purgedThrough.bind(log);
      let reads = 0;
      log.purgedThrough = () => {
        reads += 1;
        return purgedThrough();
      };
      try {
        const sub = await resumeWs(t!, KEY, atPurged);
        await waitFor(() => sub.events.length === 1 || sub.errors.length > 0, 20_000, 'the replay after the cursor');
        await postCompletion(upgraded.url, upgraded.id, 'p4');
        await waitFor(() => sub.events.length === 2 || sub.errors.length > 0, 20_000, 'the live event');
        await sub.close();
        expect(sub.errors).toEqual([]);
        expect(sub.events.map((e) => e.n)).toEqual(['p3', 'p4']);
        expect(reads).toBe(1);
      } finally {
        log.purgedThrough = purgedThrough;
      }
    });

    it('reads after the cursor of the last purged event over MCP wait_for_events', async () => {
      const mcp = await mcpClient(t!, { key: KEY });
      try {
        const spent = await readsSpent(t!);
        const result = await mcp.call('wait_for_events', { cursor: atPurged, timeoutSeconds: 0 });
        expect(result.isError).toBeFalsy();
        expect((result.structuredContent as { events: unknown[] }).events).toHaveLength(2);
        // A read spends its point (so the refusals above spent none).
        expect(await readsSpent(t!)).toBe(spent + 1);
      } finally {
        await mcp.close();
      }
    });

    // The replica started with the log empty, after the purge: the numbers it never delivered are the purged ones.
    // A cursor it hands out now has lost nothing, and must resume, however the purge's watermark stands.
    it('resumes from a cursor this replica handed out after the purge, over MCP and over graphql-ws', async () => {
      await mcpCursorResumes(t!, KEY);
      await resumesFromALiveCursor(t!, KEY, upgraded, 'p5', 'p6');
    });

    // A reserved stream (graphql-sse's single connection) carries several operations: one resumed from a purged
    // cursor is refused as on a stream of its own, ending that operation alone, and the stream goes on with the rest.
    it.each([
      { from: 'Last-Event-ID', field: 'Last-Event-ID' },
      { from: 'after', field: 'after' },
    ])(
      'is refused as expired on a reserved SSE stream ($from), which goes on with its other operations',
      async ({ from, field }) => {
        const gw = t!;
        const sse = reservedSse(gw, KEY, RESUME);
        const token = await sse.reserve();
        const res = await sse.get(token);
        expect(res.statusCode).toBe(200);
        const events: SseEvent[] = [];
        res.setEncoding('utf8');
        res.on(
          'data',
          sseEvents((e) => events.push(e)),
        );
        const add = async (
          operationId: string,
          variables: Record<string, unknown>,
          headers: Record<string, string>,
        ) => {
          const post = await request(`${gw.url}/graphql/stream`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${KEY}`,
              'content-type': 'application/json',
              accept: 'application/json',
              'x-graphql-event-stream-token': token,
              ...headers,
            },
            body: JSON.stringify({ query: RESUME, variables, extensions: { operationId } }),
          });
          await post.body.text();
          expect(post.statusCode).toBe(202);
        };
        const of = (id: string) => events.filter((e) => e.data?.id === id);
        try {
          await add(
            'purged',
            from === 'after' ? { after: before } : {},
            from === 'after' ? {} : { 'last-event-id': before },
          );
          await waitFor(() => of('purged').some((e) => e.event === 'complete'), 20_000, 'the refused operation to end');
          expect(of('purged').map((e) => e.event)).toEqual(['next', 'complete']);
          expect(of('purged')[0]!.data.payload.errors[0]).toMatchObject({
            message: expect.stringMatching(new RegExp(`^${field}: .*retention purge has deleted`)),
            extensions: { code: 'BAD_USER_INPUT', field, reason: 'expired', retentionMs: 7 * DAY_MS },
          });
          expect(of('purged')[0]!.data.payload.data ?? null).toBeNull();

          // The stream is still open, and another operation on it gets a live event.
          const subscribers = gw.gateway.services.events.bus.subscribers(VERIFICATION_EVENT_KIND);
          await add('live', {}, {});
          await waitFor(
            () => gw.gateway.services.events.bus.subscribers(VERIFICATION_EVENT_KIND) > subscribers,
            20_000,
            'the second operation to subscribe',
          );
          const n = `reserved-${from}`;
          await postCompletion(upgraded.url, upgraded.id, n);
          await waitFor(
            () => of('live').some((e) => e.event === 'next'),
            20_000,
            'the live event on the reserved stream',
          );
          expect(of('live')[0]!.data.payload.data.verificationCompleted.payload.n).toBe(n);
          expect(res.destroyed).toBe(false);
        } finally {
          res.destroy();
        }
      },
    );
  });
});
