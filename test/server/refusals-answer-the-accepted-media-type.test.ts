// POST /graphql's own refusals (a body that is not JSON, over GRAPHQL_MAX_BODY_BYTES or with a Content-Encoding, a
// document over GRAPHQL_MAX_TOKENS, a trusted document's unknown id or a malformed query) are answered in the media
// type the request's Accept asks for, as Apollo answers its own refusals (GraphQL over HTTP: the server MUST respect
// the Accept header and encode the response in the highest priority media type it supports):
// application/graphql-response+json to a client that accepts only it or prefers it, application/json to one that
// asks for JSON or sends no Accept.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';

const KEY = 'media-type-app-key-0123';
const GRAPHQL_RESPONSE = 'application/graphql-response+json; charset=utf-8';
const JSON_TYPE = 'application/json; charset=utf-8';
const KNOWN = 'query Known { __typename }';

let gw: TestGateway;
beforeAll(async () => {
  const manifest = path.join(tempDataDir('media-type-manifest-'), 'persisted-documents.json');
  fs.writeFileSync(manifest, JSON.stringify({ [createHash('sha256').update(KNOWN).digest('hex')]: KNOWN }));
  gw = await startTestGateway({
    GATEWAY_API_KEYS: KEY,
    GRAPHQL_MAX_BODY_BYTES: '16384',
    TRUSTED_DOCUMENTS: 'allow',
    TRUSTED_DOCUMENTS_MANIFEST: manifest,
  });
});
afterAll(() => gw?.close());

const REFUSALS: ReadonlyArray<[string, Record<string, string>, string, number, string]> = [
  ['a body that is not JSON', {}, '{"query":', 400, 'BAD_REQUEST'],
  [
    'a body over GRAPHQL_MAX_BODY_BYTES',
    {},
    JSON.stringify({ query: `{ __typename } #${'x'.repeat(20_000)}` }),
    413,
    'BAD_REQUEST',
  ],
  ['a body with a Content-Encoding', { 'content-encoding': 'gzip' }, '{"query":"{ __typename }"}', 415, 'BAD_REQUEST'],
  [
    'a document over GRAPHQL_MAX_TOKENS',
    {},
    JSON.stringify({ query: `{ ${'__typename '.repeat(1200)}}` }),
    400,
    'GRAPHQL_VALIDATION_FAILED',
  ],
  ['an unknown documentId', {}, '{"documentId":"no-such-document"}', 200, 'PERSISTED_QUERY_NOT_FOUND'],
  ['a query that is not a string', {}, '{"query":1}', 400, 'BAD_REQUEST'],
];

async function post(accept: string | undefined, headers: Record<string, string>, body: string) {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${KEY}`,
      ...(accept ? { accept } : {}),
      ...headers,
    },
    body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, type: res.headers['content-type'], body: JSON.parse(text) };
}

describe("POST /graphql's own refusals and the Accept header", () => {
  for (const [name, headers, body, status, code] of REFUSALS) {
    it(`${name}: ${status} ${code}, in the media type the client accepts`, async () => {
      for (const [accept, type] of [
        ['application/graphql-response+json', GRAPHQL_RESPONSE],
        ['application/graphql-response+json, application/json;q=0.9', GRAPHQL_RESPONSE],
        ['application/json', JSON_TYPE],
        [undefined, JSON_TYPE],
      ] as const) {
        const answer = await post(accept, headers, body);
        expect(answer.status, `${accept}`).toBe(status);
        expect(answer.body.errors[0].extensions.code, `${accept}`).toBe(code);
        expect(answer.type, `Accept: ${accept}`).toBe(type);
      }
    });
  }
});
