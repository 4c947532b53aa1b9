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

// graphql-sse's own refusals of the protocol's misuse (a token that names no stream, an operation id missing or taken,
// an Accept or a method it does not answer, several operations and no name) are answered as every other refusal:
// a JSON body whose error carries the contract's code, with graphql-sse's status kept; the next request is answered.
describe("SSE refusals of graphql-sse's protocol", () => {
  const auth = { authorization: `Bearer ${KEY}` };
  const json = { 'content-type': 'application/json' };
  const subscription = (operationId: string) =>
    JSON.stringify({ query: 'subscription { heartbeat }', extensions: { operationId } });
  let token: string;
  beforeAll(async () => {
    const put = await request(`${gw.url}/graphql/stream`, { method: 'PUT', headers: auth });
    token = await put.body.text();
    const added = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { ...auth, ...json, 'x-graphql-event-stream-token': token },
      body: subscription('taken'),
    });
    expect(added.statusCode).toBe(202);
    await added.body.text();
  });
  const reserved = () => ({ 'x-graphql-event-stream-token': token });
  const twoOperations = JSON.stringify({ query: 'query a { __typename } query b { __typename }' });

  it.each([
    ['PUT that accepts only HTML', 'PUT', '', () => ({ accept: 'text/html' }), undefined, 406, 'BAD_REQUEST'],
    ['a method graphql-sse does not take', 'PATCH', '', reserved, undefined, 405, 'BAD_REQUEST'],
    ['DELETE naming no stream', 'DELETE', '?operationId=x', () => ({}), undefined, 404, 'NOT_FOUND'],
    [
      'DELETE, a token that names no stream',
      'DELETE',
      '?operationId=x',
      () => ({ 'x-graphql-event-stream-token': 'zz' }),
      undefined,
      404,
      'NOT_FOUND',
    ],
    ['DELETE without its operationId', 'DELETE', '', reserved, undefined, 400, 'BAD_REQUEST'],
    [
      'POST, a token that names no stream',
      'POST',
      '',
      () => ({ ...json, 'x-graphql-event-stream-token': 'zz' }),
      subscription('x'),
      404,
      'NOT_FOUND',
    ],
    [
      'POST to a stream without an operationId',
      'POST',
      '',
      () => ({ ...json, ...reserved() }),
      '{"query":"{ __typename }"}',
      400,
      'BAD_REQUEST',
    ],
    [
      'POST to a stream, an operationId already running',
      'POST',
      '',
      () => ({ ...json, ...reserved() }),
      subscription('taken'),
      409,
      'CONFLICT',
    ],
    [
      'POST to a stream, accepting only HTML',
      'POST',
      '',
      () => ({ ...json, ...reserved(), accept: 'text/html' }),
      subscription('y'),
      406,
      'BAD_REQUEST',
    ],
    [
      'POST, several operations and no operationName',
      'POST',
      '',
      () => ({ ...json, accept: 'text/event-stream' }),
      twoOperations,
      400,
      'OPERATION_RESOLUTION_FAILURE',
    ],
    [
      'POST, neither an event stream nor a stream named',
      'POST',
      '',
      () => ({ ...json, accept: 'application/json' }),
      twoOperations,
      404,
      'NOT_FOUND',
    ],
    [
      'GET connecting a token that names no stream (released, or never reserved)',
      'GET',
      '',
      () => ({ accept: 'text/event-stream', 'x-graphql-event-stream-token': 'zz' }),
      undefined,
      404,
      'NOT_FOUND',
    ],
    [
      'GET, a mutation',
      'GET',
      `?query=${encodeURIComponent('mutation { ping }')}`,
      () => ({ accept: 'text/event-stream' }),
      undefined,
      405,
      'BAD_REQUEST',
    ],
  ] as const)('%s', async (_name, method, search, extra, body, status, code) => {
    const res = await request(`${gw.url}/graphql/stream${search}`, {
      method,
      headers: { ...auth, ...extra() },
      ...(body === undefined ? {} : { body }),
    });
    const text = await res.body.text();
    expect(res.statusCode, text).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const answer = JSON.parse(text) as { errors: { message: string; extensions?: { code?: string } }[] };
    expect(answer.errors[0]!.extensions?.code, text).toBe(code);
    expect(answer.errors[0]!.message.length).toBeGreaterThan(0);
    expect((await gw.graphql('{ __typename }', {}, { key: KEY })).data).toEqual({ __typename: 'Query' });
  });
});

// graphql-sse reads a POST's body only when its Content-Type says JSON: any other is refused 415, with a message that
// says what to send, whatever the body holds, and before it is read as JSON (a form body is no malformed JSON).
describe('an SSE POST whose Content-Type is not JSON', () => {
  it.each([
    ['text/plain, a JSON body', 'text/plain', '{"query":"{ __typename }"}'],
    ['form fields', 'application/x-www-form-urlencoded', 'query=%7B__typename%7D'],
    ['no Content-Type', undefined, '{"query":"{ __typename }"}'],
  ] as const)('%s: 415 BAD_REQUEST naming the media type to send', async (_name, type, body) => {
    const res = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { ...headers, ...(type === undefined ? {} : { 'content-type': type }) },
      body,
    });
    expect(res.statusCode).toBe(415);
    expect(await res.body.json()).toEqual({
      errors: [
        {
          message: 'the body must be JSON, sent with Content-Type: application/json',
          extensions: { code: 'BAD_REQUEST' },
        },
      ],
    });
    expect((await gw.graphql('{ __typename }', {}, { key: KEY })).data).toEqual({ __typename: 'Query' });
  });
});

// A field of the wrong type is refused over SSE in the words POST /graphql (GET /graphql for a GET's query string)
// refuses it with, naming the field: an operationName that is no string read as no name, and was refused as a document
// of several operations (OPERATION_RESOLUTION_FAILURE), which a one-operation document is not.
describe('an SSE request whose field is of the wrong type', () => {
  const graphqlAnswer = async (method: 'GET' | 'POST', search: string, body: string | undefined) => {
    const res = await request(`${gw.url}/graphql${search}`, {
      method,
      headers: {
        authorization: `Bearer ${KEY}`,
        ...(body === undefined ? { 'apollo-require-preflight': 'true' } : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body }),
    });
    return { status: res.statusCode, body: await res.body.json() };
  };
  const typename = encodeURIComponent('{ __typename }');

  it.each([
    ['operationName a number', 'POST', '', '{"query":"{ __typename }","operationName":5}'],
    ['operationName an object', 'POST', '', '{"query":"query a { __typename }","operationName":{}}'],
    ['query a number', 'POST', '', '{"query":5}'],
    ['variables a number', 'POST', '', '{"query":"{ __typename }","variables":5}'],
    ['variables a list', 'POST', '', '{"query":"{ __typename }","variables":[]}'],
    ['variables a string', 'POST', '', '{"query":"{ __typename }","variables":"{}"}'],
    ['extensions a number', 'POST', '', '{"query":"{ __typename }","extensions":5}'],
    ['extensions a string', 'POST', '', '{"query":"{ __typename }","extensions":"{}"}'],
    ['GET, variables a number', 'GET', `?query=${typename}&variables=5`, undefined],
    ['GET, extensions a list', 'GET', `?query=${typename}&extensions=%5B%5D`, undefined],
  ] as const)('%s: 400 BAD_REQUEST in the words of /graphql', async (_name, method, search, body) => {
    const expected = await graphqlAnswer(method, search, body);
    expect(expected.status).toBe(400);
    const res = await request(`${gw.url}/graphql/stream${search}`, {
      method,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body }),
    });
    expect(res.statusCode).toBe(400);
    expect(await res.body.json()).toEqual(expected.body);
    expect((await gw.graphql('{ __typename }', {}, { key: KEY })).data).toEqual({ __typename: 'Query' });
  });

  it('operationName null is no name: the one operation runs', async () => {
    const res = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: '{"query":"{ __typename }","operationName":null}',
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toContain('{"data":{"__typename":"Query"}}');
  });
});

// A method the route does not take is refused 405 with Allow, whether the request names a reserved stream or not, and
// whatever it accepts: not 404 "no stream named", nor 415 as an event stream's operation in an unread body.
describe('an SSE request with a method the route does not take', () => {
  it.each([
    ['PATCH naming no stream', 'PATCH', {}],
    ['PATCH naming no stream, accepting an event stream', 'PATCH', { accept: 'text/event-stream' }],
    ['OPTIONS naming no stream', 'OPTIONS', {}],
    ['PATCH naming a token', 'PATCH', { 'x-graphql-event-stream-token': 'zz' }],
  ] as const)('%s: 405 with Allow', async (_name, method, extra) => {
    const res = await request(`${gw.url}/graphql/stream`, {
      method,
      headers: { authorization: `Bearer ${KEY}`, ...extra },
    });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, POST, PUT, DELETE');
    expect(await res.body.json()).toEqual({
      errors: [
        {
          message: 'this method is not allowed on /graphql/stream: GET, POST, PUT (reserve) or DELETE (stop)',
          extensions: { code: 'BAD_REQUEST' },
        },
      ],
    });
  });
});
