// Over SSE a `next` event's `id:` is its result's cursor (`extensions.cursor`), which an EventSource sends back as
// Last-Event-ID when it reconnects. It is taken from the result, never from the event's text: a result without a
// cursor (a query's, a mutation's) has no `id:`, even when a JSON scalar of its data holds a key "cursor" (here a
// verification callback's body, written by the upstream), and a subscription event's `id:` is its own cursor. In both
// of graphql-sse's modes, also with several operations on one reserved stream.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { registerVerifications } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'sse-event-ids-key';
const SENDERS_CURSOR = 'chosenByTheSender';
const QUERY = 'query($id: ID!) { node(id: $id) { ... on Verification { completion { payload } } } }';
const SUBSCRIPTION = 'subscription($id: ID!) { verificationCompleted(externalId: $id) { externalId payload } }';

let gw: TestGateway;
let externalId: string;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY, SANDBOX_CALLBACK_DELAY_MS: '600000' });
  const sandbox: VerificationSandbox = gw.gateway.sandbox.verification!;
  const [[id, url]] = [...(await registerVerifications(gw, sandbox, KEY, 1)).entries()] as [[string, string]];
  externalId = id;
  // The verification interface's callback body is the sender's to choose, and is kept as a JSON scalar.
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ verificationExternalId: id, status: 'COMPLETED', cursor: SENDERS_CURSOR }),
  });
  await res.body.text();
  expect(res.statusCode).toBe(204);
});
afterAll(async () => {
  await gw?.close();
});

interface Event {
  /** The event's lines as written, e.g. ['id: …', 'event: next', 'data: {…}']. */
  lines: string[];
  id: string | undefined;
  data: any;
}

/** An event stream read as it arrives: its events (comments left out) and a way to wait for the next ones. */
function readEvents(body: AsyncIterable<Buffer>): { events: Event[]; ended: Promise<void> } {
  const events: Event[] = [];
  let text = '';
  const ended = (async () => {
    for await (const chunk of body) {
      text += chunk.toString('utf8');
      let end: number;
      while ((end = text.indexOf('\n\n')) !== -1) {
        const lines = text.slice(0, end).split('\n');
        text = text.slice(end + 2);
        if (lines.every((line) => line.startsWith(':'))) continue;
        const id = lines.find((line) => line.startsWith('id: '))?.slice(4);
        const data = lines.find((line) => line.startsWith('data: '))?.slice(6);
        events.push({ lines, id, data: data === undefined ? null : JSON.parse(data) });
      }
    }
  })().catch(() => undefined);
  return { events, ended };
}

/** One operation over a distinct event stream, read to its end. */
async function distinct(query: string): Promise<Event[]> {
  const res = await request(`${gw.url}/graphql/stream`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ query, variables: { id: externalId } }),
  });
  expect(res.statusCode).toBe(200);
  const read = readEvents(res.body);
  await read.ended;
  return read.events;
}

describe('the id of an SSE event', () => {
  it('is absent for a query\'s result, whose data holds a key "cursor": the event is written as it was', async () => {
    const events = await distinct(QUERY);
    expect(events.map((e) => e.lines[0])).toEqual(['event: next', 'event: complete']);
    const [next] = events;
    expect(next!.data).toEqual({
      data: {
        node: {
          completion: { payload: { verificationExternalId: externalId, status: 'COMPLETED', cursor: SENDERS_CURSOR } },
        },
      },
    });
    expect(next!.id).toBeUndefined();
    expect(next!.lines).toEqual(['event: next', `data: ${JSON.stringify(next!.data)}`]);
  });

  it("is a subscription event's own cursor, not one its data holds", async () => {
    const controller = new AbortController();
    const res = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: SUBSCRIPTION, variables: { id: externalId } }),
      signal: controller.signal,
    });
    const read = readEvents(res.body);
    // The callback arrived before the subscription: it is delivered at once from the event log.
    await waitFor(() => read.events.length >= 1, 20_000, 'the stored event');
    controller.abort();
    await read.ended;
    const [next] = read.events;
    expect(next!.data.data.verificationCompleted.payload.cursor).toBe(SENDERS_CURSOR);
    const cursor = next!.data.extensions.cursor as string;
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(cursor).not.toBe(SENDERS_CURSOR);
    expect(next!.lines).toEqual([`id: ${cursor}`, 'event: next', `data: ${JSON.stringify(next!.data)}`]);
  });

  it('on a reserved stream carrying queries and a subscription at once, is each result its own', async () => {
    const auth = { authorization: `Bearer ${KEY}` };
    const put = await request(`${gw.url}/graphql/stream`, { method: 'PUT', headers: auth });
    expect(put.statusCode).toBe(201);
    const token = await put.body.text();
    const controller = new AbortController();
    const stream = await request(`${gw.url}/graphql/stream`, {
      method: 'GET',
      headers: { ...auth, accept: 'text/event-stream', 'x-graphql-event-stream-token': token },
      signal: controller.signal,
    });
    expect(stream.statusCode).toBe(200);
    const read = readEvents(stream.body);
    const operations = { q1: QUERY, s: SUBSCRIPTION, q2: QUERY, q3: QUERY };
    // Sent together, so that their results may reach the stream in any order.
    await Promise.all(
      Object.entries(operations).map(async ([operationId, query]) => {
        const res = await request(`${gw.url}/graphql/stream`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json', 'x-graphql-event-stream-token': token },
          body: JSON.stringify({ query, variables: { id: externalId }, extensions: { operationId } }),
        });
        await res.body.text();
        expect(res.statusCode).toBe(202);
      }),
    );
    const nexts = () => read.events.filter((e) => e.lines.includes('event: next'));
    await waitFor(() => nexts().length === 4, 20_000, 'a result of each operation');
    controller.abort();
    await read.ended;
    const byOperation = new Map(nexts().map((e) => [e.data.id as string, e]));
    expect([...byOperation.keys()].sort()).toEqual(['q1', 'q2', 'q3', 's']);
    for (const q of ['q1', 'q2', 'q3']) {
      const event = byOperation.get(q)!;
      expect(event.data.payload.data.node.completion.payload.cursor, q).toBe(SENDERS_CURSOR);
      expect(event.id, q).toBeUndefined();
      expect(event.lines, q).toEqual(['event: next', `data: ${JSON.stringify(event.data)}`]);
    }
    const event = byOperation.get('s')!;
    const cursor = event.data.payload.extensions.cursor as string;
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(event.lines).toEqual([`id: ${cursor}`, 'event: next', `data: ${JSON.stringify(event.data)}`]);
  });
});
