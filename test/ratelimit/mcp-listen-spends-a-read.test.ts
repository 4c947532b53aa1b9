// An MCP subscriptions/listen stream is a subscription over MCP: it spends one point of its app's reads budget
// (RATE_LIMIT_READS) as a GraphQL subscription over graphql-ws or SSE does, and as wait_for_events does. Past the
// budget it is refused with RATE_LIMITED and its retry-after, and nothing is watched; a listen refused as bad input
// spends nothing; another app's budget is its own. Over real HTTP, with raw requests.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { MAX_LISTENED_RESOURCES } from '../../src/server/mcp/http.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawListen } from '../helpers/mcp.js';
import { subscribers } from '../helpers/wait.js';

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

/** A listen on `uris` with `key`: its first message (the acknowledgement, or the refusal), the stream left open. */
function listen(key: string, id: string, uris: string[]): Promise<Record<string, any>> {
  const stream = new AbortController();
  open.push(stream);
  return rawListen(gw, { key, id, uris, signal: stream.signal });
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
