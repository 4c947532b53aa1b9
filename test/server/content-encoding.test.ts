// A body sent with a Content-Encoding (gzip, deflate, br) is decoded by no route: POST /graphql, POST
// /graphql/stream and POST /mcp refuse it unread, 415, saying so in their own format (a GraphQL BAD_REQUEST, a
// JSON-RPC error), as the webhooks do (test/faults/bad-input-changes-nothing.test.ts). Not "the body is not valid
// JSON": it may well be. Nothing runs, and the next request is answered.
import zlib from 'node:zlib';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY = 'content-encoding-key-0123456789';
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(() => gw.close());

const projects = async () =>
  ((await gw.graphql('{ projects(first: 100) { id } }', {}, { key: KEY })).data as { projects: unknown[] }).projects
    .length;

const creation = JSON.stringify({ query: M.project, variables: { input: { name: 'encoded' } } });
const jsonRpc = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'ping', arguments: {} },
});

describe('a request body with a Content-Encoding', () => {
  it.each([
    ['POST /graphql', '/graphql', creation, {}],
    ['POST /graphql/stream', '/graphql/stream', creation, { accept: 'text/event-stream' }],
    ['POST /mcp', '/mcp', jsonRpc, { accept: 'application/json, text/event-stream' }],
  ] as const)('%s: 415 naming the coding, nothing run', async (_name, path, body, headers) => {
    const before = await projects();
    for (const [coding, encoded] of [
      ['gzip', zlib.gzipSync(body)],
      ['deflate', zlib.deflateSync(body)],
    ] as const) {
      const res = await request(`${gw.url}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEY}`,
          'content-type': 'application/json',
          'content-encoding': coding,
          ...headers,
        },
        body: encoded,
      });
      const text = await res.body.text();
      expect(res.statusCode, text).toBe(415);
      const answer = JSON.parse(text) as {
        errors?: { message: string; extensions?: { code?: string } }[];
        error?: { message: string };
      };
      const message = answer.errors?.[0]?.message ?? answer.error?.message;
      expect(message, text).toBe(`Content-Encoding ${coding} is not supported: send the body unencoded`);
      if (answer.errors) expect(answer.errors[0]!.extensions?.code, text).toBe('BAD_REQUEST');
    }
    expect(await projects()).toBe(before);
    expect((await gw.graphql('{ __typename }', {}, { key: KEY })).data).toEqual({ __typename: 'Query' });
  });
});
