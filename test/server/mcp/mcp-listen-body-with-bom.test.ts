// A subscriptions/listen request whose JSON body starts with a UTF-8 byte order mark is read by the MCP SDK (its
// TextDecoder drops the mark): the gateway must read it the same way, or the stream it opens escapes what the gateway
// holds a listen stream to (the per-app bound of open streams, the JWT's expiry, a reload) and is never told of a
// change. Over real HTTP, with raw requests.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { MAX_LISTENS_PER_APP } from '../../../src/server/mcp/http.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { subscribers } from '../../helpers/wait.js';

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

let gw: TestGateway;
const open: AbortController[] = [];
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: 'alpha:key-a' });
});
afterEach(() => {
  for (const stream of open.splice(0)) stream.abort();
});
afterAll(async () => {
  await gw?.close();
});

/**
 * Opens a subscriptions/listen on `authReqId`'s resource with `prefix` before the JSON body; resolves with the first
 * message the answer carries (the acknowledgement of an opened stream, or the refusal), the stream left open.
 */
async function listen(id: string, authReqId: string, prefix = ''): Promise<Record<string, any>> {
  const stream = new AbortController();
  open.push(stream);
  const body = {
    jsonrpc: '2.0',
    id,
    method: 'subscriptions/listen',
    params: { _meta: META, notifications: { resourceSubscriptions: [`mobileid://authentications/${authReqId}`] } },
  };
  const res = await fetch(`${gw.url}/mcp`, {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      authorization: 'Bearer key-a',
      'content-type': 'application/json',
      'mcp-method': 'subscriptions/listen',
      'mcp-protocol-version': '2026-07-28',
    },
    body: prefix + JSON.stringify(body),
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

describe('a subscriptions/listen body with a byte order mark', () => {
  it('opens a stream that is watched like any other', async () => {
    const ack = await listen('bom-watched', 'bom-watched', '\ufeff');
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    // The acknowledgement is written as the stream subscribes: its resource is watched on the gateway's bus by then.
    expect(subscribers(gw, 'mobile-id', 'bom-watched')).toBe(1);
  });

  it(`counts toward the app's ${MAX_LISTENS_PER_APP} open streams`, async () => {
    for (let i = 0; i < MAX_LISTENS_PER_APP; i++) {
      expect((await listen(`held-${i}`, `held-${i}`)).method).toBe('notifications/subscriptions/acknowledged');
    }
    const refused = await listen('one-more', 'one-more', '\ufeff');
    expect(refused).toMatchObject({
      id: 'one-more',
      error: { code: -32603, message: expect.stringMatching(/^Subscription limit reached: this app already has 16/) },
    });
  });
});
