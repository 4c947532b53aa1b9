// With TRUSTED_DOCUMENTS off (the default), Apollo's persisted-query extension and a `documentId` get one answer on
// every transport (docs/graphql-api.md, Trusted documents): POST /graphql answers them in Apollo's words (a version
// other than 1 and a hash that is not the text's: BAD_REQUEST; a hash alone: PERSISTED_QUERY_NOT_FOUND, nothing being
// kept; an id with no text: BAD_REQUEST), and graphql-ws and graphql-sse answer them the same, each as it carries its
// other refusals of a request (graphql-ws an `error` message, graphql-sse the operation's one result). They used to
// ignore the extension and run the text, a creation included, and to word an unknown id each in its own way.
import { createHash, randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type AnsweredError, type Transport } from '../helpers/operation.js';

const KEY = 'persisted-query-every-transport-key';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const apq = (version: unknown, sha256Hash: string) => ({ persistedQuery: { version, sha256Hash } });
/** A creation, so that a refusal is seen to run nothing: the cloud upstream gets no request for it. */
const creation = () => `mutation { createProject(input: { name: "apq-${randomUUID()}" }) { project { id } } }`;

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(async () => {
  await gw?.close();
});

/** POST /graphql as an APQ client sends it: no `query` at all when it sends the hash or the id alone. */
async function post(body: Record<string, unknown>): Promise<{ status: number; errors?: AnsweredError[] }> {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, ...((await res.body.json()) as { errors?: AnsweredError[] }) };
}

const upstreamRequests = () => gw.gateway.sandbox.cloud!.requests.length;

interface Case {
  what: string;
  /** The request, its text left out where it has none (graphql-ws and graphql-sse then carry an empty `query`). */
  request: () => { query?: string; extensions?: Record<string, unknown>; documentId?: string };
  code: string;
  message: string;
}

const CASES: Case[] = [
  {
    what: 'a version other than 1',
    request: () => {
      const text = creation();
      return { query: text, extensions: apq(2, sha256(text)) };
    },
    code: 'BAD_REQUEST',
    message: 'Unsupported persisted query version',
  },
  {
    what: "a hash that is not the text's",
    request: () => ({ query: creation(), extensions: apq(1, sha256(creation())) }),
    code: 'BAD_REQUEST',
    message: 'provided sha does not match query',
  },
  {
    what: 'a hash alone',
    request: () => ({ extensions: apq(1, sha256(creation())) }),
    code: 'PERSISTED_QUERY_NOT_FOUND',
    message: 'PersistedQueryNotFound',
  },
  {
    what: 'a documentId alone',
    request: () => ({ documentId: sha256(creation()) }),
    code: 'BAD_REQUEST',
    message: 'GraphQL operations must contain a non-empty `query` or a `persistedQuery` extension.',
  },
];

describe.each(['ws', 'sse', 'sse-single'] as Transport[])(
  'TRUSTED_DOCUMENTS off: the persisted-query extension and documentId over %s',
  (transport) => {
    it.each(CASES)('$what: answered as POST answers it, and nothing runs', async ({ request: make, code, message }) => {
      const sent = make();
      const overPost = await post(sent);
      expect(overPost.errors, JSON.stringify(overPost)).toEqual([{ message, extensions: { code } }]);

      const before = upstreamRequests();
      const logged = gw.logs().length;
      const answer = await operationOver(transport, gw, KEY, { ...sent, query: sent.query ?? '' });
      expect(answer.errors, answer.raw).toEqual(overPost.errors);
      expect(answer.data ?? null, answer.raw).toBeNull();
      // Nothing ran: the creation never reached the cloud upstream.
      expect(upstreamRequests()).toBe(before);
      // The client's mistake is not logged as an unexpected error.
      expect(gw.logs().slice(logged)).not.toMatch(/"level":50/);
    });

    it("runs a creation sent with its text's hash and version 1, as POST does", async () => {
      const text = creation();
      const before = upstreamRequests();
      const answer = await operationOver(transport, gw, KEY, { query: text, extensions: apq(1, sha256(text)) });
      expect(answer.errors, answer.raw).toBeUndefined();
      expect(answer.data, answer.raw).toMatchObject({ createProject: { project: { id: expect.any(String) } } });
      expect(upstreamRequests()).toBeGreaterThan(before);
    });
  },
);

/** The refusals above for a query, whose operation a GET carries in its query string (a creation may not go by GET). */
const QUERY = '{ __typename }';
const GET_CASES = [
  { what: 'a version other than 1', query: QUERY, extensions: apq(2, sha256(QUERY)) },
  { what: "a hash that is not the text's", query: QUERY, extensions: apq(1, sha256(`${QUERY} `)) },
  { what: 'a hash alone', query: undefined, extensions: apq(1, sha256(QUERY)) },
];

describe('TRUSTED_DOCUMENTS off: the persisted-query extension in the query string of a GET', () => {
  const search = (query: string | undefined, extensions: unknown) =>
    new URLSearchParams({ ...(query === undefined ? {} : { query }), extensions: JSON.stringify(extensions) });

  it.each(GET_CASES)('$what: GET /graphql/stream answers as GET /graphql does', async ({ query, extensions }) => {
    const overGet = await request(`${gw.url}/graphql?${search(query, extensions)}`, {
      headers: { authorization: `Bearer ${KEY}`, accept: 'application/json', 'apollo-require-preflight': 'true' },
    });
    const { errors } = (await overGet.body.json()) as { errors: AnsweredError[] };
    expect(errors).toHaveLength(1);

    const overSse = await request(`${gw.url}/graphql/stream?${search(query, extensions)}`, {
      headers: { authorization: `Bearer ${KEY}`, accept: 'text/event-stream' },
    });
    const text = await overSse.body.text();
    expect(overSse.statusCode, text).toBe(200);
    const next = /event: next\ndata: (.*)\n/.exec(text);
    expect(next, text).not.toBeNull();
    expect(JSON.parse(next![1]!)).toEqual({ data: null, errors });
    expect(text).toContain('event: complete');
  });
});
