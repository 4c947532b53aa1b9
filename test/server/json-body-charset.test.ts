// A JSON request body sent in a charset its Content-Type declares (`charset=utf-16le`, `windows-1251`) is read in that
// charset on every route that reads a JSON body, POST /graphql, POST /graphql/stream and POST /mcp, by the rule the
// webhooks read theirs with (test/server/webhook-charset.test.ts): read as UTF-8 whatever it declared, such a body was
// "not valid JSON", or its text was read wrong. A charset the gateway cannot read is a 415 and bytes invalid in the
// declared one a 400, both naming the charset, in the webhooks' words.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY = 'json-body-charset-key-0123456789';
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(() => gw.close());

async function post(path: string, body: Buffer, type: string, headers: Record<string, string> = {}) {
  const res = await request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': type, ...headers },
    body,
  });
  return { status: res.statusCode, text: await res.body.text() };
}

/** windows-1251's bytes of `text` (Node encodes only UTF-8 and UTF-16), from its WHATWG decoder. */
function cp1251(text: string): Buffer {
  const decoder = new TextDecoder('windows-1251');
  const bytes = new Map<string, number>();
  for (let b = 0; b < 256; b++) bytes.set(decoder.decode(Uint8Array.of(b)), b);
  return Buffer.from([...text].map((c) => bytes.get(c)!));
}

const QUERY = JSON.stringify({ query: '{ __typename }' });
const PING = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' });
const SSE = { accept: 'text/event-stream' };
const MCP = { accept: 'application/json, text/event-stream' };

describe('a JSON request body in the charset its Content-Type declares', () => {
  it('POST /graphql: a UTF-16 body is run', async () => {
    const res = await post('/graphql', Buffer.from(QUERY, 'utf16le'), 'application/json; charset=utf-16le');
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ data: { __typename: 'Query' } });
  });

  it('POST /graphql: a windows-1251 body is read as the text it holds, not as UTF-8', async () => {
    // A variable's value is said back in the error that refuses it.
    const body = JSON.stringify({
      query: 'query Q($n: Int) { projects(first: $n) { id } }',
      variables: { n: 'привет' },
    });
    const res = await post('/graphql', cp1251(body), 'application/json; charset="Windows-1251"');
    expect(res.status, res.text).toBe(400);
    expect(JSON.parse(res.text).errors[0].message).toContain('"привет"');
  });

  it('POST /graphql/stream: a UTF-16 body is run', async () => {
    const res = await post('/graphql/stream', Buffer.from(QUERY, 'utf16le'), 'application/json; charset=utf-16le', SSE);
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain('"data":{"__typename":"Query"}');
  });

  it('POST /mcp: a UTF-16 message is answered', async () => {
    const res = await post('/mcp', Buffer.from(PING, 'utf16le'), 'application/json; charset=utf-16le', MCP);
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain('"id":7');
    expect(res.text).not.toContain('"error"');
  });

  // A media type is case-insensitive (RFC 9110 §8.3.1), as a charset's label is: /graphql/stream took only a Content-Type
  // holding `application/json` in lower case (graphql-sse's own test), and refused one a client wrote in capitals 415.
  it.each([
    [
      'POST /graphql',
      '/graphql',
      {},
      (text: string) => expect(JSON.parse(text)).toEqual({ data: { __typename: 'Query' } }),
    ],
    [
      'POST /graphql/stream',
      '/graphql/stream',
      SSE,
      (text: string) => expect(text).toContain('"data":{"__typename":"Query"}'),
    ],
  ] as const)(
    '%s: a Content-Type written in capitals is the same media type and charset',
    async (_n, path, headers, ran) => {
      for (const [type, body] of [
        ['Application/JSON', Buffer.from(QUERY)],
        ['APPLICATION/JSON; CHARSET="UTF-8"', Buffer.from(QUERY)],
        ['Application/Json; Charset=UTF-16LE', Buffer.from(QUERY, 'utf16le')],
      ] as const) {
        const res = await post(path, body, type, headers);
        expect(res.status, `${type}: ${res.text}`).toBe(200);
        ran(res.text);
      }
    },
  );

  it('an explicit UTF-8 or US-ASCII charset reads as a body that declares none', async () => {
    for (const charset of ['utf-8', 'UTF-8', 'us-ascii']) {
      const res = await post('/graphql', Buffer.from(QUERY), `application/json; charset=${charset}`);
      expect(res.status, `${charset}: ${res.text}`).toBe(200);
    }
  });
});

describe('a JSON request body in a charset that cannot be read', () => {
  const unknown = 'the charset "x-klingon" is not one the gateway can read: send the body in UTF-8';
  const invalid = 'the body is not valid text in its declared charset "utf-16le"';
  // An odd number of bytes is no UTF-16 text.
  const odd = Buffer.concat([Buffer.from(QUERY, 'utf16le'), Buffer.from('x')]);

  it.each([
    ['POST /graphql', '/graphql', {}],
    ['POST /graphql/stream', '/graphql/stream', SSE],
  ] as const)(
    '%s: a charset the gateway does not know is 415, bytes invalid in the declared one 400',
    async (_n, path, headers) => {
      const refused = await post(path, Buffer.from(QUERY), 'application/json; charset=x-klingon', headers);
      expect(refused.status, refused.text).toBe(415);
      expect(JSON.parse(refused.text).errors).toEqual([{ message: unknown, extensions: { code: 'BAD_REQUEST' } }]);
      const bad = await post(path, odd, 'application/json; charset=utf-16le', headers);
      expect(bad.status, bad.text).toBe(400);
      expect(JSON.parse(bad.text).errors).toEqual([{ message: invalid, extensions: { code: 'BAD_REQUEST' } }]);
    },
  );

  it('POST /mcp: a charset the gateway does not know is 415, bytes invalid in the declared one a parse error', async () => {
    const refused = await post('/mcp', Buffer.from(PING), 'application/json; charset=x-klingon', MCP);
    expect(refused.status, refused.text).toBe(415);
    expect(JSON.parse(refused.text)).toMatchObject({ jsonrpc: '2.0', error: { code: -32000, message: unknown } });
    const bad = await post(
      '/mcp',
      Buffer.concat([Buffer.from(PING, 'utf16le'), Buffer.from('x')]),
      'application/json; charset=utf-16le',
      MCP,
    );
    expect(bad.status, bad.text).toBe(400);
    expect(JSON.parse(bad.text)).toMatchObject({
      jsonrpc: '2.0',
      error: { code: -32700, message: `Parse error: ${invalid}` },
    });
  });
});
