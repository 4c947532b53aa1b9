import fc from 'fast-check';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CursorCodec, Position } from '../../src/events/cursor.js';
import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import {
  cursorNow,
  noWildcardListener,
  postCompletion,
  registerVerifications,
  resumeWs,
  slowWsConsumer,
  type Resumed,
} from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const KEY = 'key-a';

describe('streams that resume where they stopped (SQLite)', () => {
  let t: TestGateway;
  let sandbox: VerificationSandbox;
  let urls: Map<string, string>;

  beforeAll(async () => {
    t = await startTestGateway({
      GATEWAY_API_KEYS: `${KEY},key-b`,
      SANDBOX_CALLBACK_DELAY_MS: '600000',
      SUBSCRIBER_BUFFER_BYTES: '65536',
      CALLBACK_BODY_KEPT_BYTES: '262144',
    });
    sandbox = t.gateway.sandbox.verification!;
    urls = await registerVerifications(t, sandbox, KEY, 3);
  });
  afterAll(async () => {
    await t.close();
  });

  it('a wildcard subscriber that reconnects with its last cursor gets what was posted meanwhile, in order and once, then live events', async () => {
    const [id] = [...urls.keys()];
    const first = await resumeWs(t, KEY, null);
    await waitForSubscribers(t, 'verification');
    await postCompletion(urls.get(id!)!, id!, 'a1');
    await waitFor(() => first.events.length === 1, 20_000, 'the first event');
    const cursor = first.events[0]!.cursor;
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    await first.close();

    for (const n of ['a2', 'a3', 'a4']) await postCompletion(urls.get(id!)!, id!, n);
    const again = await resumeWs(t, KEY, cursor);
    await waitFor(() => again.events.length === 3, 20_000, 'the replay');
    await postCompletion(urls.get(id!)!, id!, 'a5');
    await waitFor(() => again.events.length === 4, 20_000, 'the live event');
    expect(again.events.map((e) => e.n)).toEqual(['a2', 'a3', 'a4', 'a5']);
    // Each carries its own cursor, and a resume from the last replayed one starts at the live one.
    expect(new Set(again.events.map((e) => e.cursor)).size).toBe(4);
    await again.close();
    const third = await resumeWs(t, KEY, again.events[2]!.cursor);
    await waitFor(() => third.events.length === 1, 20_000, 'the resume from a replayed cursor');
    expect(third.events.map((e) => e.n)).toEqual(['a5']);
    await third.close();
  });

  it('a cursor older than EVENT_RETENTION is refused with BAD_USER_INPUT naming the retention, and nothing is streamed', async () => {
    const old = t.gateway.services.events.cursors.encode(new Position(1), Date.now() - 7 * 86_400_000 - 60_000);
    const sub = await resumeWs(t, KEY, old);
    await waitFor(() => sub.errors.length > 0, 20_000, 'the refusal');
    expect(sub.errors[0]).toMatchObject({
      message: expect.stringContaining('EVENT_RETENTION, 7 days'),
      extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'expired', retentionMs: 604_800_000 },
    });
    expect(sub.events).toEqual([]);
    await sub.close();
  });

  it('a cursor the gateway did not hand out is refused with BAD_USER_INPUT on after', async () => {
    const sub = await resumeWs(t, KEY, 'bm90LWEtY3Vyc29y');
    await waitFor(() => sub.errors.length > 0, 20_000, 'the refusal');
    expect(sub.errors[0]).toMatchObject({
      message: 'after: not a cursor this gateway handed out',
      extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'malformed' },
    });
    await sub.close();
  });

  it('a forged cursor (one the gateway handed out, altered in one character; one sealed under another secret; one with thousands of holes) is refused as malformed naming after, and nothing is streamed', async () => {
    const cursors = t.gateway.services.events.cursors;
    const real = cursors.encode(new Position(2), Date.now());
    const altered = real.slice(0, 5) + (real[5] === 'A' ? 'B' : 'A') + real.slice(6);
    const otherSecret = CursorCodec.random().encode(new Position(2), Date.now());
    // The shape of the review's 45 KB cursor with 4,096 holes, in the old clear form.
    const holes = ['1', String(Math.floor(Date.now() / 1000)), '1'];
    for (let n = 3; holes.length < 4099; n += 2) holes.push(String(n));
    for (const forged of [altered, otherSecret, holes.join('_')]) {
      const sub = await resumeWs(t, KEY, forged);
      await waitFor(() => sub.errors.length > 0, 20_000, 'the refusal');
      expect(sub.errors[0]).toMatchObject({
        message: 'after: not a cursor this gateway handed out',
        extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'malformed' },
      });
      expect(sub.events).toEqual([]);
      await sub.close();
    }
  });

  it('over SSE a malformed or expired cursor, in after or in Last-Event-ID, is BAD_USER_INPUT naming the cursor and why, as over graphql-ws', async () => {
    const old = t.gateway.services.events.cursors.encode(new Position(1), Date.now() - 7 * 86_400_000 - 60_000);
    const cases = [
      { after: 'bm90LWEtY3Vyc29y', reason: 'malformed', field: 'after' },
      { lastEventId: 'bm90LWEtY3Vyc29y', reason: 'malformed', field: 'Last-Event-ID' },
      { after: old, reason: 'expired', field: 'after' },
      { lastEventId: old, reason: 'expired', field: 'Last-Event-ID' },
    ];
    for (const c of cases) {
      const res = await request(`${t.url}/graphql/stream`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEY}`,
          'content-type': 'application/json',
          accept: 'text/event-stream',
          ...(c.lastEventId ? { 'last-event-id': c.lastEventId } : {}),
        },
        body: JSON.stringify({
          query: 'subscription($after: String) { verificationCompleted(after: $after) { externalId } }',
          variables: c.after ? { after: c.after } : {},
        }),
      });
      const text = await res.body.text();
      expect(text, JSON.stringify(c)).not.toContain('Unable to detect operation AST');
      const data = /^data: (.*)$/m.exec(text)?.[1];
      expect(data, text).toBeDefined();
      const errors = (JSON.parse(data!) as { errors: { message: string; extensions: Record<string, unknown> }[] })
        .errors;
      expect(errors[0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: c.field, reason: c.reason });
      expect(errors[0]!.message).toMatch(new RegExp(`^${c.field}: `));
    }
  });

  it('over SSE each event has its cursor as its id, and Last-Event-ID resumes after it', async () => {
    const [, id] = [...urls.keys()];
    const query = 'subscription { verificationCompleted { externalId payload } }';
    const open = async (lastEventId?: string) => {
      const controller = new AbortController();
      const res = await request(`${t.url}/graphql/stream`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEY}`,
          'content-type': 'application/json',
          accept: 'text/event-stream',
          ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
        },
        body: JSON.stringify({ query }),
        signal: controller.signal,
      });
      const frames: { id?: string; n: string }[] = [];
      let text = '';
      const reading = (async () => {
        for await (const chunk of res.body) {
          text += chunk.toString();
          let end: number;
          while ((end = text.indexOf('\n\n')) !== -1) {
            const block = text.slice(0, end);
            text = text.slice(end + 2);
            if (!block.includes('event: next')) continue;
            const idLine = /^id: (.*)$/m.exec(block)?.[1];
            const data = JSON.parse(/^data: (.*)$/m.exec(block)![1]!);
            expect(data.extensions.cursor).toBe(idLine);
            frames.push({ id: idLine, n: data.data.verificationCompleted.payload.n });
          }
        }
      })().catch(() => undefined);
      return { frames, close: async () => (controller.abort(), await reading) };
    };
    await noWildcardListener(t, 'verification');
    const first = await open();
    await waitForSubscribers(t, 'verification');
    await postCompletion(urls.get(id!)!, id!, 's1');
    await waitFor(() => first.frames.length === 1, 20_000, 'the first SSE event');
    await first.close();
    await postCompletion(urls.get(id!)!, id!, 's2');
    const again = await open(first.frames[0]!.id);
    await waitFor(() => again.frames.length === 1, 20_000, 'the replayed SSE event');
    expect(again.frames.map((f) => f.n)).toEqual(['s2']);
    await again.close();
  });

  it('a slow consumer is closed with 1013 and its last cursor, counted, and resuming from that cursor loses nothing', async () => {
    const [, , id] = [...urls.keys()];
    await noWildcardListener(t, 'verification');
    const { ns, cursors, posted, closed } = await slowWsConsumer(t, KEY, urls.get(id!)!, id!, 's');
    expect(t.logs()).toContain('closing a slow WebSocket subscriber');
    expect(closed.code).toBe(1013);
    expect(closed.reason).toContain('slow consumer');
    // The reason names the last cursor written, which is the last one the client received.
    expect(closed.reason).toContain(`after ${cursors[cursors.length - 1]}`);
    expect(ns.length).toBeLessThan(posted.length);
    // The subscription closed as slow is no longer one of its app's live ones (APP_LIVE_SUBSCRIPTIONS).
    await waitFor(
      async () => !/^gateway_live_subscriptions\{/m.test(await (await request(`${t.url}/metrics`)).body.text()),
      20_000,
      'no live subscription left after the slow consumer was closed',
    );
    const resumed = await resumeWs(t, KEY, cursors[cursors.length - 1]!);
    await waitFor(() => ns.length + resumed.events.length === posted.length, 30_000, 'the rest after the cursor');
    expect([...ns, ...resumed.events.map((e) => e.n)]).toEqual(posted);
    await resumed.close();
  }, 120_000);

  it('random disconnects and reconnects with the last cursor deliver every event once and in order (fast-check property)', async () => {
    const [id] = [...urls.keys()];
    const url = urls.get(id!)!;
    let round = 0;
    let cases = 0;
    // post n events | connect (with the last cursor received) | disconnect (whatever arrived so far, the replay possibly unfinished)
    const op = fc.oneof(
      fc.integer({ min: 1, max: 3 }).map((n) => ({ post: n })),
      fc.constant({ toggle: true }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 3, maxLength: 12 }), async (ops) => {
        round += 1;
        cases += 1;
        const posted: string[] = [];
        const got: { n: string; cursor: string }[] = [];
        let cursor = cursorNow(t);
        let sub: Resumed | null = null;
        for (const o of ops) {
          if ('post' in o) {
            for (let k = 0; k < o.post; k++) {
              const name = `p${round}-${posted.length}`;
              posted.push(name);
              await postCompletion(url, id!, name);
            }
          } else if (sub === null) {
            sub = await resumeWs(t, KEY, cursor);
          } else {
            await sub.close();
            got.push(...sub.events);
            if (sub.events.length) cursor = sub.events[sub.events.length - 1]!.cursor;
            sub = null;
          }
        }
        sub ??= await resumeWs(t, KEY, cursor);
        const last = sub;
        await waitFor(() => got.length + last.events.length >= posted.length, 20_000, `round ${round}: every event`);
        await last.close();
        got.push(...last.events);
        expect(got.map((e) => e.n)).toEqual(posted);
      }),
      { numRuns: 30, seed: 35_3 },
    );
    console.log(`resumable streams property (SQLite): ${cases} cases`);
    expect(cases).toBe(30);
  }, 300_000);
});
