// A tools/call whose params are not a tool's name and its arguments (arguments a string or an array, name a number or
// missing, no params at all) is answered with a JSON-RPC error in the gateway's words, naming the field, as every other
// /mcp refusal is: not the SDK's dump of its schema's issues. Over real HTTP, with raw requests.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { rawMcpPost } from '../../helpers/mcp.js';

const KEY = 'malformed-tool-call-key-0123456789';
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: `agent:${KEY}` });
});
afterAll(() => gw.close());

/** POSTs one tools/call message with `params` (left out when undefined); its one answer, SSE or JSON. */
async function call(id: number, params: unknown): Promise<Record<string, any>> {
  const body = { jsonrpc: '2.0', id, method: 'tools/call', ...(params === undefined ? {} : { params }) };
  const { status, text, messages } = await rawMcpPost(gw, KEY, body);
  expect(status, text).toBe(200);
  return messages[0]!;
}

describe('a tools/call with malformed params', () => {
  it.each([
    [
      'arguments a string',
      { name: 'projects', arguments: '{"first":1}' },
      'params.arguments',
      "params.arguments is a string where an object is expected (the tool's arguments by name)",
    ],
    [
      'arguments an array',
      { name: 'projects', arguments: [] },
      'params.arguments',
      "params.arguments is an array where an object is expected (the tool's arguments by name)",
    ],
    [
      'name a number',
      { name: 7, arguments: {} },
      'params.name',
      "params.name is a number where a string is expected (the tool's name)",
    ],
    [
      'name missing',
      { arguments: {} },
      'params.name',
      'params.name is missing: name the tool to call (tools/list shows the tools this app may call)',
    ],
    [
      'params missing',
      undefined,
      'params',
      "params is missing where an object is expected (the tool's name and its arguments)",
    ],
  ] as const)('%s: a JSON-RPC error naming the field', async (_name, params, field, said) => {
    const answer = await call(41, params);
    expect(answer).toEqual({
      jsonrpc: '2.0',
      id: 41,
      error: { code: -32602, message: `Invalid params: ${said}`, data: { field } },
    });
  });

  it('well formed, is answered as before: a tool that is not there is a tool error', async () => {
    const answer = await call(42, { name: 'no_such_tool', arguments: {} });
    expect(answer).toMatchObject({ id: 42, result: { isError: true } });
    expect(answer.result.content[0].text).toMatch(/^no tool "no_such_tool" on this endpoint/);
  });
});
