// SUBSCRIPTION_COMPILED_SOURCE on the wire (docs/decisions/154): a subscribe that does not become a stream (bad
// variables, a resolver that refuses its arguments, a root the plan leaves to graphql-js) is answered with the same
// bytes by a gateway whose source streams come from their documents' plans (the default) and by one that runs
// graphql-js's createSourceEventStream for every subscribe, over graphql-ws and over SSE. (Subscriptions that do become
// streams are compared frame by frame in test/server/delivery-shortcuts.test.ts, whose plain gateway has it off.)
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const API_KEY = 'app-key-1';

let planned: TestGateway;
let plain: TestGateway;
beforeAll(async () => {
  const env = { GATEWAY_API_KEYS: `app-a:${API_KEY}`, SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm' };
  planned = await startTestGateway(env);
  plain = await startTestGateway({ ...env, SUBSCRIPTION_COMPILED_SOURCE: 'false' });
});
afterAll(async () => {
  await Promise.all([planned?.close(), plain?.close()]);
});

/** The frames a graphql-ws subscribe gets until its `error` or `complete`, as text. */
function wsAnswer(gw: TestGateway, payload: Record<string, unknown>): Promise<string[]> {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
    headers: { authorization: `Bearer ${API_KEY}` },
  });
  const frames: string[] = [];
  return new Promise<string[]>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    ws.on('message', (data: Buffer) => {
      const text = data.toString('utf8');
      const type = (JSON.parse(text) as { type: string }).type;
      if (type === 'connection_ack') return ws.send(JSON.stringify({ id: 'op-1', type: 'subscribe', payload }));
      if (type === 'ping') return;
      frames.push(text);
      if (type === 'complete' || type === 'error') {
        ws.close();
        resolve(frames);
      }
    });
  });
}

/** An SSE subscribe's status and whole body (each of these answers ends the stream at once). */
async function sseAnswer(gw: TestGateway, payload: Record<string, unknown>): Promise<{ status: number; body: string }> {
  const res = await request(`${gw.url}/graphql/stream`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(payload),
  });
  return { status: res.statusCode, body: await res.body.text() };
}

const MOBILE_ID = 'subscription($id: String!) { mobileIdAuthentication(authReqId: $id) { __typename } }';

const CASES: Array<{ name: string; payload: Record<string, unknown> }> = [
  { name: 'a required variable missing', payload: { query: MOBILE_ID, variables: {} } },
  { name: 'a variable of the wrong type', payload: { query: MOBILE_ID, variables: { id: 5 } } },
  { name: 'an argument the resolver refuses', payload: { query: MOBILE_ID, variables: { id: '' } } },
  { name: 'an argument too long', payload: { query: MOBILE_ID, variables: { id: 'x'.repeat(600) } } },
  {
    name: 'a refusal at an alias, from a literal',
    payload: { query: 'subscription { mine: mobileIdAuthentication(authReqId: "") { __typename } }' },
  },
  {
    name: 'a malformed cursor',
    payload: { query: 'subscription { identificationCompleted(after: "not-a-cursor") { __typename } }' },
  },
  {
    name: 'a root field left out by @include',
    payload: {
      query: 'subscription($on: Boolean!) { mobileIdAuthentication(authReqId: "a1") @include(if: $on) { __typename } }',
      variables: { on: false },
    },
  },
  {
    name: 'an operation picked by name',
    payload: {
      query: `subscription A { mobileIdAuthentication(authReqId: "") { __typename } } subscription B { x: mobileIdAuthentication(authReqId: "") { __typename } }`,
      operationName: 'B',
    },
  },
];

describe('a subscribe that does not become a stream, with and without its plan', () => {
  it.each(CASES)('graphql-ws answers $name with the same frames', async ({ payload }) => {
    const [fromPlan, fromJs] = await Promise.all([wsAnswer(planned, payload), wsAnswer(plain, payload)]);
    expect(fromPlan).toEqual(fromJs);
    // Each ends the subscription with an error, or with one result holding the errors, then its complete.
    expect(fromPlan.join('\n')).toMatch(/"errors"|"type":"error"/);
  });

  it.each(CASES)('SSE answers $name with the same bytes', async ({ payload }) => {
    const [fromPlan, fromJs] = await Promise.all([sseAnswer(planned, payload), sseAnswer(plain, payload)]);
    expect(fromPlan).toEqual(fromJs);
    expect(fromPlan.body).toContain('errors');
  });
});
