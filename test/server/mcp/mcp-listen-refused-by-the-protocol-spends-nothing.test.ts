// A subscriptions/listen the protocol layer refuses before it opens a stream (a protocol revision this endpoint does
// not serve, headers that disagree with the body) is a refused listen: it spends no point of its app's reads budget
// and counts no stream, as one whose params are refused does. Over real HTTP, with raw requests.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { RAW_META, rawListen } from '../../helpers/mcp.js';

let gw: TestGateway;
const open: AbortController[] = [];
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: 'alpha:key-a', RATE_LIMIT_READS: '1/1h' });
});
afterEach(() => {
  for (const stream of open.splice(0)) stream.abort();
});
afterAll(async () => {
  await gw?.close();
});

const URI = 'mobileid://authentications/refused-by-the-protocol';

/** A raw listen with `headers` and the envelope's `revision`: its status and JSON answer. */
async function refusedListen(headers: Record<string, string>, revision: string) {
  const res = await fetch(`${gw.url}/mcp`, {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      authorization: 'Bearer key-a',
      'content-type': 'application/json',
      ...headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 'refused',
      method: 'subscriptions/listen',
      params: {
        _meta: { ...RAW_META, 'io.modelcontextprotocol/protocolVersion': revision },
        notifications: { resourceSubscriptions: [URI] },
      },
    }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe('a subscriptions/listen the protocol refuses', () => {
  it('spends no read and counts no stream: the next listen is opened', async () => {
    const unsupported = await refusedListen(
      { 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'subscriptions/listen' },
      '2099-01-01',
    );
    expect(unsupported.status).toBe(400);
    expect(unsupported.body).toMatchObject({
      id: 'refused',
      error: { code: -32022, data: { supported: ['2026-07-28'], requested: '2099-01-01' } },
    });
    const headless = await refusedListen({ 'mcp-protocol-version': '2026-07-28' }, '2026-07-28');
    expect(headless.status).toBe(400);
    expect(headless.body.error).toMatchObject({ code: -32020 });
    const mismatched = await refusedListen(
      { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' },
      '2026-07-28',
    );
    expect(mismatched.status).toBe(400);
    expect(mismatched.body.error).toMatchObject({ code: -32020 });

    const stream = new AbortController();
    open.push(stream);
    const opened = await rawListen(gw, { key: 'key-a', id: 'opened', uris: [URI], signal: stream.signal });
    expect(opened.method).toBe('notifications/subscriptions/acknowledged');
  });
});
