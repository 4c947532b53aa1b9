// Authentication before lexing (docs/decisions/055): POST /graphql and GET /graphql authenticate before the token
// limit lexes the document, before it is parsed, validated or cached. A request without valid credentials gets its
// 401 whatever its document, and leaves no entry in the token check's memory nor in the document cache. Over
// WebSocket and SSE the connection (or request) is authenticated before any operation is read
// (test/execution/rules-every-transport.test.ts). Two apps over real HTTP, with and without the direct path.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { GatewayOptions } from '../../src/gateway/options.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEYS = { GATEWAY_API_KEYS: 'shop:shop-key-0123456789,crm:crm-key-0123456789' };
/** 600 aliases: 1,802 tokens, over GRAPHQL_MAX_TOKENS (1,000). */
const ALIASES = `{ ${Array.from({ length: 600 }, (_, i) => `a${i}: __typename`).join(' ')} }`;

describe.each([
  ['the direct path', {}],
  ["Apollo's pipeline", { testing: { directPath: false } }],
] as Array<[string, GatewayOptions]>)('authentication before lexing, over %s', (_name, options) => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway(KEYS, options);
  });
  afterAll(() => t.close());

  const left = () => ({ documents: t.gateway.documents.size, checked: t.gateway.limits.checkedTexts });

  it('with no credentials, a 600-alias document gets 401, not 400 Token limit exceeded', async () => {
    for (const key of [undefined, 'not-a-key']) {
      const res = await t.graphql(ALIASES, undefined, key ? { key } : {});
      expect(res.status).toBe(401);
      expect(res.errors![0]!.extensions!.code).toBe('UNAUTHENTICATED');
    }
    // With a key, the same document is refused by the token limit.
    const res = await t.graphql(ALIASES, undefined, { key: 'crm-key-0123456789' });
    expect(res.status).toBe(400);
    expect(res.errors![0]!.extensions).toMatchObject({ limit: 'GRAPHQL_MAX_TOKENS' });
  });

  it('an unauthenticated request leaves no document-cache entry and nothing in the token check, over POST and GET', async () => {
    const before = left();
    const text = '{ unauthenticated: __typename }';
    expect((await t.graphql(text)).status).toBe(401);
    expect((await t.graphql(text, undefined, { key: 'wrong-key' })).status).toBe(401);
    const get = await request(`${t.url}/graphql?query=${encodeURIComponent(text)}`, {
      headers: { accept: 'application/json', 'apollo-require-preflight': 'true' },
    });
    expect(get.statusCode).toBe(401);
    await get.body.dump();
    expect(left()).toEqual(before);
    // The same text with a key of either app is lexed and kept.
    expect((await t.graphql(text, undefined, { key: 'shop-key-0123456789' })).status).toBe(200);
    expect(left().checked).toBe(before.checked + 1);
  });
});
