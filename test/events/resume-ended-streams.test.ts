// The two streams that end (mobileIdAuthentication: once; provisioningProgress: at SUCCEEDED or FAILED) resume from a
// cursor like the others, over graphql-ws with `after` and over SSE with Last-Event-ID: a resume after the event that
// ended the stream completes at once with nothing; a resume after an earlier event delivers exactly what came later,
// once; without a cursor nothing changes. Real server on port 0, SQLite on disk, real clients.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, wsClient, type Collected } from '../helpers/mobile-id.js';
import {
  ended,
  kafkaInput,
  MOBILE_ID_AFTER,
  MOBILE_ID_SSE,
  PROGRESS_AFTER,
  PROGRESS_SSE,
  PROVISION_KAFKA,
  sseStream,
} from '../helpers/resumable.js';
import { waitForSubscribers } from '../helpers/wait.js';

const KEY = 'resume-ended-key';

const MOBILE_ID = MOBILE_ID_AFTER;
const PROGRESS = PROGRESS_AFTER;
const kafka = (n: number) => kafkaInput(`resume-${n}`, '10.60.0.0/24');

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(async () => {
  await t?.close();
});

/** A graphql-ws subscription of `query`; `after` only when given. */
function overWs(query: string, variables: Record<string, unknown>): Collected {
  return collect(wsClient(t, { key: KEY }), query, variables);
}

/** One operation over a distinct SSE stream, with Last-Event-ID when given. */
const overSse = (query: string, variables: Record<string, unknown>, lastEventId?: string) =>
  sseStream(t, KEY, query, variables, lastEventId);

/** The position a cursor names, without its date. */
const positionOf = (cursor: string) => t.gateway.services.events.cursors.decode(cursor, Infinity).position;

async function completeMobileId(authReqId: string): Promise<void> {
  const n = await t.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(t, n.body)).status).toBe(204);
}

describe('mobileIdAuthentication resumed from a cursor', () => {
  it('over graphql-ws: without a cursor the stored result once (as before); with the cursor of that result, completes at once with nothing; with an earlier cursor, the result once', async () => {
    await completeMobileId('ws-earlier');
    const earlier = overWs(MOBILE_ID, { id: 'ws-earlier' });
    await ended(earlier.done, 'the earlier result');
    const earlierCursor = earlier.results[0].extensions.cursor as string;

    await completeMobileId('ws-done');
    // (c) No cursor: the stored result, once, then the stream completes.
    const first = overWs(MOBILE_ID, { id: 'ws-done' });
    await ended(first.done, 'the stream without a cursor');
    expect(first.errors).toEqual([]);
    expect(first.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual(['ws-done']);
    const cursor = first.results[0].extensions.cursor as string;
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);

    // (a) Resumed after the result: it was delivered; the stream completes at once with no `next`.
    const again = overWs(MOBILE_ID, { id: 'ws-done', after: cursor });
    await ended(again.done, 'the resume after the result');
    expect(again.errors).toEqual([]);
    expect(again.completed()).toBe(true);
    expect(again.results).toEqual([]);

    // (b) Resumed after an earlier event: the result, which came after it, once.
    const later = overWs(MOBILE_ID, { id: 'ws-done', after: earlierCursor });
    await ended(later.done, 'the resume after an earlier event');
    expect(later.errors).toEqual([]);
    expect(later.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual(['ws-done']);
    // The same position as the stored result's cursor. Not the same text: that one is dated when its stream started,
    // this one by the event's receipt (a cursor's date stands for the events outside it), a second apart at times.
    expect(positionOf(later.results[0].extensions.cursor)).toEqual(positionOf(cursor));

    // (b) A result that has not arrived yet when the stream resumes: delivered live, once, then the stream completes.
    const waiting = overWs(MOBILE_ID, { id: 'ws-live', after: cursor });
    await waitForSubscribers(t, 'mobile-id', 'ws-live');
    await completeMobileId('ws-live');
    await ended(waiting.done, 'the live result after a resume');
    expect(waiting.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual(['ws-live']);
  });

  it('over SSE with Last-Event-ID: after the result completes at once with nothing; after an earlier event, the result once; without, as before', async () => {
    await completeMobileId('sse-earlier');
    const earlier = await overSse(MOBILE_ID_SSE, { id: 'sse-earlier' });
    await ended(earlier.done, 'the earlier result');
    const earlierId = earlier.nexts()[0]!.id!;

    await completeMobileId('sse-done');
    // (c)
    const first = await overSse(MOBILE_ID_SSE, { id: 'sse-done' });
    await ended(first.done, 'the stream without Last-Event-ID');
    expect(first.nexts().map((e) => e.data.data.mobileIdAuthentication.authReqId)).toEqual(['sse-done']);
    const id = first.nexts()[0]!.id!;
    expect(id).toBe(first.nexts()[0]!.data.extensions.cursor);

    // (a)
    const again = await overSse(MOBILE_ID_SSE, { id: 'sse-done' }, id);
    await ended(again.done, 'the resume after the result');
    expect(again.events.map((e) => e.event)).toEqual(['complete']);

    // (b)
    const later = await overSse(MOBILE_ID_SSE, { id: 'sse-done' }, earlierId);
    await ended(later.done, 'the resume after an earlier event');
    expect(later.events.map((e) => e.event)).toEqual(['next', 'complete']);
    expect(later.nexts()[0]!.data.data.mobileIdAuthentication.authReqId).toBe('sse-done');
    // The same position, dated apart at times: see the test over graphql-ws.
    expect(positionOf(later.nexts()[0]!.id!)).toEqual(positionOf(id));
  });

  it('two results for one auth_req_id (on the shared token, then on a token the app issued): without a cursor and resumed from an earlier one, the newest once, as the query reads it', async () => {
    await completeMobileId('two-earlier');
    const earlier = overWs(MOBILE_ID, { id: 'two-earlier' });
    await ended(earlier.done, 'the earlier result');
    const earlierCursor = earlier.results[0].extensions.cursor as string;

    // The shared sandbox token's result first, then the app's own (a token it issued), both the app's to read.
    await completeMobileId('two-results');
    const issued = await t.graphql(
      `mutation { issueMobileIdNotificationToken(authReqId: "two-results") { token } }`,
      {},
      { key: KEY },
    );
    expect(issued.errors).toBeUndefined();
    const own = await t.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'two-results' });
    const token = issued.data!.issueMobileIdNotificationToken.token as string;
    expect((await postNotification(t, own.body, { token })).status).toBe(204);
    const read = await t.graphql(
      `query { mobileIdAuthentication(authReqId: "two-results") { __typename } }`,
      {},
      { key: KEY },
    );
    expect(read.data!.mobileIdAuthentication.__typename).toBe('MobileIdAuthenticated');

    const kinds = (c: Collected) => c.results.map((r) => r.data.mobileIdAuthentication.__typename);
    const now = overWs(MOBILE_ID, { id: 'two-results' });
    await ended(now.done, 'the stream without a cursor');
    expect(now.errors).toEqual([]);
    expect(kinds(now)).toEqual(['MobileIdAuthenticated']);

    const resumed = overWs(MOBILE_ID, { id: 'two-results', after: earlierCursor });
    await ended(resumed.done, 'the resume from before both results');
    expect(resumed.errors).toEqual([]);
    expect(kinds(resumed)).toEqual(['MobileIdAuthenticated']);
    // Its cursor covers both results: a resume from it completes at once with nothing.
    const again = overWs(MOBILE_ID, { id: 'two-results', after: resumed.results[0].extensions.cursor });
    await ended(again.done, 'the resume after the newest result');
    expect(again.completed()).toBe(true);
    expect(again.results).toEqual([]);

    const overSseResumed = await overSse(MOBILE_ID_SSE, { id: 'two-results' }, earlierCursor);
    await ended(overSseResumed.done, 'the SSE resume from before both results');
    expect(overSseResumed.nexts().map((e) => e.data.data.mobileIdAuthentication.__typename)).toEqual([
      'MobileIdAuthenticated',
    ]);
  });
});

describe('provisioningProgress resumed from a cursor', () => {
  let provisioningId: string;
  /** Every state the provisioning's events record, each with its cursor, as a resume from before it delivers them. */
  let states: { state: string; json: string; cursor: string }[];

  const view = (r: any) => JSON.stringify(r.data.provisioningProgress);

  beforeAll(async () => {
    // A cursor of an event before the provisioning: another provisioning's last state.
    const before = await t.graphql(PROVISION_KAFKA, { input: kafka(0) }, { key: KEY });
    await t.gateway.services.provisioning.idle();
    const beforeId = before.data!.provisionKafkaCluster.provisioning.id as string;
    const { db } = t.gateway.services.store;
    const beforeSeq = await db
      .selectFrom('events')
      .select('seq')
      .where('kind', '=', 'provisioning')
      .where('key', '=', beforeId)
      .orderBy('seq', 'desc')
      .executeTakeFirstOrThrow();
    const beforeCursor = t.gateway.services.events.cursors.encode(
      t.gateway.services.events.bus.position().upTo(Number(beforeSeq.seq)),
      Date.now(),
    );

    const res = await t.graphql(PROVISION_KAFKA, { input: kafka(1) }, { key: KEY });
    expect(res.errors).toBeUndefined();
    provisioningId = res.data!.provisionKafkaCluster.provisioning.id;
    await t.gateway.services.provisioning.idle();
    const all = overWs(PROGRESS, { id: provisioningId, after: beforeCursor });
    await ended(all.done, 'the replay of every state');
    expect(all.errors).toEqual([]);
    states = all.results.map((r) => ({
      state: r.data.provisioningProgress.state,
      json: view(r),
      cursor: r.extensions.cursor,
    }));
    const events = await db
      .selectFrom('events')
      .select('seq')
      .where('kind', '=', 'provisioning')
      .where('key', '=', provisioningId)
      .execute();
    expect(states).toHaveLength(events.length);
    expect(states.length).toBeGreaterThan(3);
    expect(states.at(-1)!.state).toBe('SUCCEEDED');
    expect(new Set(states.map((s) => s.cursor)).size).toBe(states.length);
  });

  it('over graphql-ws: after the terminal state completes at once with nothing; after an earlier state, exactly the later ones once; without a cursor, the current state (as before)', async () => {
    // (a)
    const again = overWs(PROGRESS, { id: provisioningId, after: states.at(-1)!.cursor });
    await ended(again.done, 'the resume after SUCCEEDED');
    expect(again.errors).toEqual([]);
    expect(again.completed()).toBe(true);
    expect(again.results).toEqual([]);

    // (b)
    const later = overWs(PROGRESS, { id: provisioningId, after: states[1]!.cursor });
    await ended(later.done, 'the resume after an earlier state');
    expect(later.errors).toEqual([]);
    expect(later.results.map(view)).toEqual(states.slice(2).map((s) => s.json));
    expect(later.results.map((r) => r.extensions.cursor)).toEqual(states.slice(2).map((s) => s.cursor));

    // (c)
    const first = overWs(PROGRESS, { id: provisioningId });
    await ended(first.done, 'the stream without a cursor');
    expect(first.results.map(view)).toEqual([states.at(-1)!.json]);
  });

  it('over SSE with Last-Event-ID: after the terminal state completes at once with nothing; after an earlier state, exactly the later ones once; without, as before', async () => {
    // (a)
    const again = await overSse(PROGRESS_SSE, { id: provisioningId }, states.at(-1)!.cursor);
    await ended(again.done, 'the resume after SUCCEEDED');
    expect(again.events.map((e) => e.event)).toEqual(['complete']);

    // (b)
    const later = await overSse(PROGRESS_SSE, { id: provisioningId }, states[2]!.cursor);
    await ended(later.done, 'the resume after an earlier state');
    expect(later.nexts().map((e) => JSON.stringify(e.data.data.provisioningProgress))).toEqual(
      states.slice(3).map((s) => s.json),
    );
    expect(later.nexts().map((e) => e.id)).toEqual(states.slice(3).map((s) => s.cursor));

    // (c)
    const first = await overSse(PROGRESS_SSE, { id: provisioningId });
    await ended(first.done, 'the stream without Last-Event-ID');
    expect(first.nexts().map((e) => JSON.stringify(e.data.data.provisioningProgress))).toEqual([states.at(-1)!.json]);
  });

  it('a resume that starts before the terminal state delivers it live, once, then completes', async () => {
    const res = await t.graphql(PROVISION_KAFKA, { input: kafka(2) }, { key: KEY });
    const id = res.data!.provisionKafkaCluster.provisioning.id as string;
    const sub = overWs(PROGRESS, { id, after: states.at(-1)!.cursor });
    await ended(sub.done, 'the resumed stream of a running provisioning');
    expect(sub.errors).toEqual([]);
    const seen = sub.results.map((r) => r.data.provisioningProgress.state);
    expect(seen.at(-1)).toBe('SUCCEEDED');
    const cursors = sub.results.map((r) => r.extensions.cursor);
    expect(new Set(cursors).size).toBe(cursors.length);
    await t.gateway.services.provisioning.idle();
  });

  it("an unknown or another app's provisioning is still NOT_FOUND with a cursor", async () => {
    const sub = overWs(PROGRESS, { id: 'no-such-provisioning', after: states.at(-1)!.cursor });
    await ended(sub.done, 'the refusal');
    const errors = [...sub.errors, ...sub.results.flatMap((r) => r.errors ?? [])] as any[];
    expect(JSON.stringify(errors)).toContain('NOT_FOUND');
  });
});
