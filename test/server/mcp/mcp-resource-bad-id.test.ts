// A resources/read whose URI holds an id no read takes (the NUL character, a lone surrogate, an externalId too long,
// blank or of two lines) is answered -32602 (invalid params) about that URI, naming none of the GraphQL read's
// variables, which the client never sent; for every kind of resource. An id that is well formed and not there is still
// "Resource not found" (-32602 too). Over real HTTP, with raw requests.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { rawMcpPost } from '../../helpers/mcp.js';

const KEY = 'resource-bad-id-key-0123456789';
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: `agent:${KEY}` });
});
afterAll(() => gw.close());

let id = 0;
const read = async (uri: string) => {
  const { status, text, messages } = await rawMcpPost(gw, KEY, {
    jsonrpc: '2.0',
    id: ++id,
    method: 'resources/read',
    params: { uri },
  });
  expect(status, text).toBe(200);
  expect(messages).toHaveLength(1);
  return messages[0]!.error as { code: number; message: string; data?: Record<string, unknown> };
};

const PREFIXES = [
  'identity://verifications/',
  'identity://identifications/',
  'mobileid://authentications/',
  'cloud://provisionings/',
];

describe('resources/read of a URI whose id no read takes', () => {
  it.each(PREFIXES.flatMap((prefix) => [[`${prefix}%00`], [`${prefix}a%00b`], [`${prefix}\ud800x`]]))(
    '%s: -32602 about the URI',
    async (uri) => {
      const error = await read(uri);
      const { message } = error;
      expect(error.code, message).toBe(-32602);
      expect(error.data).toEqual({ uri, code: 'BAD_USER_INPUT' });
      expect(message).toMatch(new RegExp(`^${uri.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: its id must `));
      // No variable of the read (`$externalIds.0`, `externalIds[0]`, `$id`, `$authReqId`) is named.
      expect(message).not.toMatch(/\$|externalIds|authReqId|\bid"|nothing was run/);
    },
  );

  it.each([
    ['identity://verifications/%00', 'must not contain the NUL character (U+0000)'],
    [`identity://verifications/${'x'.repeat(201)}`, 'must be at most 200 characters'],
    ['identity://verifications/%20', 'must not be empty'],
    ['identity://verifications/a%0Ab', 'must be one line of text without control characters; found U+000A'],
  ])('%s: says why', async (uri, why) => {
    const error = await read(uri);
    expect(error).toEqual({ code: -32602, message: `${uri}: its id ${why}`, data: { uri, code: 'BAD_USER_INPUT' } });
  });

  it.each(PREFIXES.map((prefix) => [`${prefix}not-there`]))('%s, well formed and not there: not found', async (uri) => {
    expect(await read(uri)).toEqual({ code: -32602, message: `Resource not found: ${uri}`, data: { uri } });
  });
});
