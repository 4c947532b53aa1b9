// A subscriptions/listen request whose JSON body starts with a UTF-8 byte order mark is read by the MCP SDK (its
// TextDecoder drops the mark): the gateway must read it the same way, or the stream it opens escapes what the gateway
// holds a listen stream to (the per-app bound of open streams, the JWT's expiry, a reload) and is never told of a
// change. Over real HTTP, with raw requests.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { MAX_LISTENS_PER_APP } from '../../../src/server/mcp/http.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { rawListen } from '../../helpers/mcp.js';
import { subscribers } from '../../helpers/wait.js';

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

/** A listen on `authReqId`'s resource with `prefix` before the JSON body: its first message, the stream left open. */
function listen(id: string, authReqId: string, prefix = ''): Promise<Record<string, any>> {
  const stream = new AbortController();
  open.push(stream);
  return rawListen(gw, {
    key: 'key-a',
    id,
    uris: [`mobileid://authentications/${authReqId}`],
    prefix,
    signal: stream.signal,
  });
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
