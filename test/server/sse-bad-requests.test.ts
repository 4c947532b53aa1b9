// Over SSE, a request that is not a GraphQL request at all (its variables not JSON, no query, variables that are no
// object) is refused with BAD_REQUEST as on every other transport, runs nothing, and the next request is answered.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY = 'sse-bad-requests-key-0123456789';
let gw: TestGateway;

beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(() => gw.close());

const headers = { authorization: `Bearer ${KEY}`, accept: 'text/event-stream' };

describe('SSE requests that are not GraphQL requests', () => {
  it.each([
    ['GET, variables not JSON', 'GET', `?query=${encodeURIComponent('{ __typename }')}&variables=%7B`, undefined],
    ['GET, extensions not JSON', 'GET', `?query=${encodeURIComponent('{ __typename }')}&extensions=x`, undefined],
    ['GET, no query', 'GET', '', undefined],
    ['POST, a JSON array', 'POST', '', '[1]'],
    ['POST, variables a string', 'POST', '', '{"query":"{ __typename }","variables":"{}"}'],
  ] as const)('%s: 400 BAD_REQUEST', async (_name, method, search, body) => {
    const res = await request(`${gw.url}/graphql/stream${search}`, {
      method,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body }),
    });
    const answer = (await res.body.json()) as { errors: { message: string; extensions?: { code?: string } }[] };
    expect(res.statusCode).toBe(400);
    expect(answer.errors[0]!.extensions?.code, JSON.stringify(answer)).toBe('BAD_REQUEST');
    expect((await gw.graphql('{ __typename }', {}, { key: KEY })).data).toEqual({ __typename: 'Query' });
  });
});
