// The two streams that end (mobileIdAuthentication, provisioningProgress) resumed on another replica: a cursor handed
// out by replica A resumes on replica B (two gateways on one embedded PostgreSQL, real graphql-ws and SSE clients).
// After the event that ended the stream: complete at once with nothing; after an earlier event: what came later, once,
// in order; before the event arrives: delivered live on B from A, once, then complete.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, wsClient, type Collected } from '../helpers/mobile-id.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';
import {
  deliveredEverywhere,
  ended as endedWithin,
  kafkaInput,
  MOBILE_ID_AFTER,
  MOBILE_ID_SSE,
  PROGRESS_AFTER,
  PROGRESS_SSE,
  PROVISION_KAFKA,
  sseStream,
  type SseEvent,
} from '../helpers/resumable.js';
import { waitForSubscribers } from '../helpers/wait.js';

const KEY = 'resume-replicas-key';

const MOBILE_ID = MOBILE_ID_AFTER;
const PROGRESS = PROGRESS_AFTER;
const kafka = (n: number) => kafkaInput(`resume-replicas-${n}`, '10.61.0.0/24');

let r: Replicas;
beforeAll(async () => {
  r = await startReplicas('resume_ended', { GATEWAY_API_KEYS: KEY });
}, 120_000);
afterAll(async () => {
  await r?.close();
});

/** A bounded wait on a stream's end, longer across replicas. */
const ended = (done: Promise<unknown>, what: string) => endedWithin(done, what, 20_000);

const overWs = (t: TestGateway, query: string, variables: Record<string, unknown>): Collected =>
  collect(wsClient(t, { key: KEY }), query, variables);

/** One operation over a distinct SSE stream on `t`, with Last-Event-ID; every event, once the stream ended. */
async function overSse(
  t: TestGateway,
  query: string,
  variables: Record<string, unknown>,
  lastEventId: string,
): Promise<SseEvent[]> {
  const stream = await sseStream(t, KEY, query, variables, lastEventId);
  await ended(stream.done, 'the SSE stream');
  return stream.events;
}

/** A mobile-ID notification, built by A's sandbox and posted to A (its notification token is A's). */
async function completeMobileId(authReqId: string): Promise<void> {
  const n = await r.a.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(r.a, n.body)).status).toBe(204);
}

describe('mobileIdAuthentication: a cursor from replica A resumed on replica B', () => {
  it('after the result: completes at once with nothing; after an earlier event: the result once; before the result: live from A, once', async () => {
    await completeMobileId('rep-earlier');
    const earlier = overWs(r.a, MOBILE_ID, { id: 'rep-earlier' });
    await ended(earlier.done, 'the earlier result on A');
    const earlierCursor = earlier.results[0].extensions.cursor as string;

    await completeMobileId('rep-done');
    const first = overWs(r.a, MOBILE_ID, { id: 'rep-done' });
    await ended(first.done, 'the result on A');
    const cursor = first.results[0].extensions.cursor as string;
    await deliveredEverywhere(r.a, r.b);

    const again = overWs(r.b, MOBILE_ID, { id: 'rep-done', after: cursor });
    await ended(again.done, 'the resume on B after the result');
    expect(again.errors).toEqual([]);
    expect(again.completed()).toBe(true);
    expect(again.results).toEqual([]);

    const later = overWs(r.b, MOBILE_ID, { id: 'rep-done', after: earlierCursor });
    await ended(later.done, 'the resume on B after an earlier event');
    expect(later.errors).toEqual([]);
    expect(later.results.map((x) => x.data.mobileIdAuthentication.authReqId)).toEqual(['rep-done']);
    // B's cursor of the result resumes on A as one after the result.
    const fromB = later.results[0].extensions.cursor as string;
    const back = overWs(r.a, MOBILE_ID, { id: 'rep-done', after: fromB });
    await ended(back.done, 'the resume on A with B’s cursor');
    expect(back.results).toEqual([]);

    expect((await overSse(r.b, MOBILE_ID_SSE, { id: 'rep-done' }, cursor)).map((e) => e.event)).toEqual(['complete']);
    const sse = await overSse(r.b, MOBILE_ID_SSE, { id: 'rep-done' }, earlierCursor);
    expect(sse.map((e) => e.event)).toEqual(['next', 'complete']);

    const waiting = overWs(r.b, MOBILE_ID, { id: 'rep-live', after: cursor });
    await waitForSubscribers(r.b, 'mobile-id', 'rep-live');
    await completeMobileId('rep-live');
    await ended(waiting.done, 'the live result on B after a resume');
    expect(waiting.errors).toEqual([]);
    expect(waiting.results.map((x) => x.data.mobileIdAuthentication.authReqId)).toEqual(['rep-live']);
  }, 60_000);
});

describe('provisioningProgress: a cursor from replica A resumed on replica B', () => {
  it('after the terminal state: nothing; after an earlier state: exactly the later ones, once and in order; while it runs on A: live on B until SUCCEEDED', async () => {
    const before = await r.a.graphql(PROVISION_KAFKA, { input: kafka(0) }, { key: KEY });
    expect(before.errors).toBeUndefined();
    await r.a.gateway.services.provisioning.idle();
    await deliveredEverywhere(r.a, r.b);
    const beforeCursor = r.a.gateway.services.events.cursors.encode(
      r.a.gateway.services.events.bus.position(),
      Date.now(),
    );

    const res = await r.a.graphql(PROVISION_KAFKA, { input: kafka(1) }, { key: KEY });
    expect(res.errors).toBeUndefined();
    const id = res.data!.provisionKafkaCluster.provisioning.id as string;
    await r.a.gateway.services.provisioning.idle();
    const all = overWs(r.a, PROGRESS, { id, after: beforeCursor });
    await ended(all.done, 'every state on A');
    expect(all.errors).toEqual([]);
    const view = (x: any) => JSON.stringify(x.data.provisioningProgress);
    const states = all.results.map((x) => ({
      state: x.data.provisioningProgress.state,
      json: view(x),
      cursor: x.extensions.cursor,
    }));
    expect(states.length).toBeGreaterThan(3);
    expect(states.at(-1)!.state).toBe('SUCCEEDED');
    await deliveredEverywhere(r.a, r.b);

    const onB = overWs(r.b, PROGRESS, { id, after: beforeCursor });
    await ended(onB.done, 'every state on B');
    expect(onB.results.map(view)).toEqual(states.map((s) => s.json));

    const again = overWs(r.b, PROGRESS, { id, after: states.at(-1)!.cursor });
    await ended(again.done, 'the resume on B after SUCCEEDED');
    expect(again.errors).toEqual([]);
    expect(again.completed()).toBe(true);
    expect(again.results).toEqual([]);

    const later = overWs(r.b, PROGRESS, { id, after: states[1]!.cursor });
    await ended(later.done, 'the resume on B after an earlier state');
    expect(later.errors).toEqual([]);
    expect(later.results.map(view)).toEqual(states.slice(2).map((s) => s.json));

    const sse = await overSse(r.b, PROGRESS_SSE, { id }, states[2]!.cursor);
    expect(sse.filter((e) => e.event === 'next').map((e) => JSON.stringify(e.data.data.provisioningProgress))).toEqual(
      states.slice(3).map((s) => s.json),
    );
    expect(sse.at(-1)!.event).toBe('complete');

    // A provisioning A runs slowly, followed on B from a cursor taken before it began.
    r.a.gateway.sandbox.cloud!.faults.latencyMs = 100;
    try {
      const running = await r.a.graphql(PROVISION_KAFKA, { input: kafka(2) }, { key: KEY });
      const runningId = running.data!.provisionKafkaCluster.provisioning.id as string;
      const live = overWs(r.b, PROGRESS, { id: runningId, after: states.at(-1)!.cursor });
      await ended(live.done, 'the resumed stream on B of a provisioning running on A');
      expect(live.errors).toEqual([]);
      const seen = live.results.map((x) => x.data.provisioningProgress);
      expect(seen.at(-1).state).toBe('SUCCEEDED');
      const done = seen.map((p: any) => p.steps.filter((s: any) => s.state === 'DONE').length);
      expect([...done].sort((x, y) => x - y)).toEqual(done);
      expect(new Set(seen.map((p: any) => JSON.stringify(p))).size).toBe(seen.length);
      await r.a.gateway.services.provisioning.idle();
    } finally {
      r.a.gateway.sandbox.cloud!.faults.latencyMs = 0;
    }
  }, 90_000);
});
