// A JSON request body that starts with a UTF-8 byte order mark (RFC 8259 §8.1: a parser may ignore it) is read as the
// JSON after it on every route that reads a JSON body: POST /graphql, POST /graphql/stream and POST /mcp, as the
// webhooks read it (test/server/webhook-json-bom.test.ts). A mark anywhere else is still not JSON.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY = 'json-body-bom-key-0123456789';
const BOM = '\uFEFF';
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(() => gw.close());

const auth = { authorization: `Bearer ${KEY}` };
const query = JSON.stringify({ query: '{ __typename }' });

async function post(path: string, body: string, headers: Record<string, string> = {}) {
  const res = await request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.statusCode, text: await res.body.text() };
}

describe('a JSON request body with a byte order mark', () => {
  it('POST /graphql: the query after the mark is run', async () => {
    const res = await post('/graphql', BOM + query);
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ data: { __typename: 'Query' } });
  });

  it('POST /graphql/stream: the query after the mark is run', async () => {
    const res = await post('/graphql/stream', BOM + query, { accept: 'text/event-stream' });
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain('"data":{"__typename":"Query"}');
  });

  it('POST /mcp: the message after the mark is answered', async () => {
    const message = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' });
    const res = await post('/mcp', BOM + message, { accept: 'application/json, text/event-stream' });
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain('"id":7');
    expect(res.text).not.toContain('"error"');
  });

  it.each([
    ['POST /graphql', '/graphql', {}],
    ['POST /graphql/stream', '/graphql/stream', { accept: 'text/event-stream' }],
  ] as const)('%s: a mark after a space is still not JSON', async (_name, path, headers) => {
    const res = await post(path, ` ${BOM}${query}`, headers);
    expect(res.status, res.text).toBe(400);
    expect(JSON.parse(res.text).errors[0]).toMatchObject({
      message: 'request body is not valid JSON',
      extensions: { code: 'BAD_REQUEST' },
    });
  });
});
