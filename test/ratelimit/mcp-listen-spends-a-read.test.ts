// An MCP subscriptions/listen stream is a subscription over MCP: it spends one point of its app's reads budget
// (RATE_LIMIT_READS) as a GraphQL subscription over graphql-ws or SSE does, and as wait_for_events does. Past the
// budget it is refused with RATE_LIMITED and its retry-after, and nothing is watched; a listen refused as bad input
// spends nothing; another app's budget is its own. Over real HTTP, with raw requests.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { MAX_LISTENED_RESOURCES } from '../../src/server/mcp/http.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribers } from '../helpers/wait.js';

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

let gw: TestGateway;
const open: AbortController[] = [];
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: 'alpha:key-a,beta:key-b', RATE_LIMIT_READS: '1/1h' });
});
afterEach(() => {
  for (const stream of open.splice(0)) stream.abort();
});
afterAll(async () => {
  await gw?.close();
});

/** Opens a subscriptions/listen on `uris`; resolves with its first message (the acknowledgement, or the refusal). */
async function listen(key: string, id: string, uris: string[]): Promise<Record<string, any>> {
  const stream = new AbortController();
  open.push(stream);
  const body = {
    jsonrpc: '2.0',
    id,
    method: 'subscriptions/listen',
    params: { _meta: META, notifications: { resourceSubscriptions: uris } },
  };
  const res = await fetch(`${gw.url}/mcp`, {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'mcp-method': 'subscriptions/listen',
      'mcp-protocol-version': '2026-07-28',
    },
    body: JSON.stringify(body),
    signal: stream.signal,
  });
  if (!res.headers.get('content-type')?.startsWith('text/event-stream'))
    return (await res.json()) as Record<string, any>;
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before its first message: ${text}`);
    text += value;
    const data = /^data: (.*)$/m.exec(text);
    if (data && text.includes('\n\n')) return JSON.parse(data[1]!) as Record<string, any>;
  }
}

const uri = (authReqId: string) => `mobileid://authentications/${authReqId}`;

describe('subscriptions/listen and the reads budget', () => {
  it('spends one point: past RATE_LIMIT_READS it is RATE_LIMITED with a retry-after and watches nothing', async () => {
    // Bad input first: refused, and it spends nothing.
    const tooMany = Array.from({ length: MAX_LISTENED_RESOURCES + 1 }, (_, i) => uri(`many-${i}`));
    expect((await listen('key-a', 'too-many', tooMany)).error).toMatchObject({ code: -32602 });

    expect((await listen('key-a', 'first', [uri('first')])).method).toBe('notifications/subscriptions/acknowledged');
    expect(subscribers(gw, 'mobile-id', 'first')).toBe(1);

    const refused = await listen('key-a', 'second', [uri('second')]);
    expect(refused).toMatchObject({
      id: 'second',
      error: {
        message: expect.stringMatching(/^rate limit of reads for this API key reached \(1 per 3600 s\); retry after/),
        data: { code: 'RATE_LIMITED', bucket: 'reads', retryAfterSeconds: expect.any(Number) },
      },
    });
    expect(refused.error.data.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(subscribers(gw, 'mobile-id', 'second')).toBe(0);

    // Another app's budget is its own.
    expect((await listen('key-b', 'other', [uri('other')])).method).toBe('notifications/subscriptions/acknowledged');
  });
});
