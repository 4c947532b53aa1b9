// In a JSON-RPC batch (an array of messages, 2025 revisions), a tools/call whose params are not a tool's name and its
// arguments is answered as the single one is: a JSON-RPC error -32602 in the gateway's words naming the field, with its
// own id, and nothing runs for it; the batch's other messages are served as usual. A batch refused as a whole, and the
// other refusals of a body that is no JSON-RPC request, are answered in clear words and run nothing. Over real HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { rawMcpPost } from '../../helpers/mcp.js';

const KEY = 'malformed-in-batch-key-0123456789';
let gw: TestGateway;
beforeAll(async () => {
  // Mutation tools run at once: a malformed call of create_project that ran would send the cloud a creation.
  gw = await startTestGateway({ GATEWAY_API_KEYS: `agent:${KEY}`, MCP_MUTATIONS: 'all' });
});
afterAll(() => gw.close());

/** POSTs `body` (sent as it is when a string) to /mcp: the status, and every JSON-RPC message of the answer. */
const post = (body: unknown) => rawMcpPost(gw, KEY, body);

/** The creations the sandboxed cloud has been sent. */
const cloudRequests = () => upstreamCreations(gw).length;

const call = (id: number | string, params?: unknown) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  ...(params === undefined ? {} : { params }),
});

const refused = (id: number | string, field: string, said: string) => ({
  jsonrpc: '2.0',
  id,
  error: { code: -32602, message: `Invalid params: ${said}`, data: { field } },
});

describe('a malformed tools/call in a batch', () => {
  it('is answered as the single one, with its own id, and the batch’s other requests as usual', async () => {
    const before = cloudRequests();
    const { status, messages } = await post([
      call(1, { name: 7, arguments: {} }),
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      call('three', { name: 'create_project', arguments: '{"input":{"name":"p"}}' }),
      call(4),
      call(5, { name: 'catalog', arguments: {} }),
      call(6, { arguments: {} }),
      call(7, { name: 'create_project', arguments: [] }),
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 8, method: 'ping' },
    ]);
    expect(status).toBe(200);
    const byId = new Map(messages.map((m) => [m.id, m]));
    expect(messages).toHaveLength(8);
    expect(byId.get(1)).toEqual(
      refused(1, 'params.name', "params.name is a number where a string is expected (the tool's name)"),
    );
    expect(byId.get('three')).toEqual(
      refused(
        'three',
        'params.arguments',
        "params.arguments is a string where an object is expected (the tool's arguments by name)",
      ),
    );
    expect(byId.get(4)).toEqual(
      refused(4, 'params', "params is missing where an object is expected (the tool's name and its arguments)"),
    );
    expect(byId.get(6)).toEqual(
      refused(
        6,
        'params.name',
        'params.name is missing: name the tool to call (tools/list shows the tools this app may call)',
      ),
    );
    expect(byId.get(7)).toEqual(
      refused(
        7,
        'params.arguments',
        "params.arguments is an array where an object is expected (the tool's arguments by name)",
      ),
    );
    expect(byId.get(2)!.result.tools.map((t: { name: string }) => t.name)).toContain('projects');
    expect(byId.get(5)).toMatchObject({ id: 5, result: { structuredContent: { catalog: {} } } });
    expect(byId.get(5)!.result.isError).toBeFalsy();
    expect(byId.get(8)).toEqual({ jsonrpc: '2.0', id: 8, result: {} });
    // The two malformed calls of create_project ran nothing; a well-formed one creates.
    expect(cloudRequests()).toBe(before);
    const ran = await post([call(9, { name: 'create_project', arguments: { input: { name: 'p' } } })]);
    expect(ran.messages[0]!.result.isError, ran.text).toBeFalsy();
    expect(cloudRequests()).toBeGreaterThan(before);
  });

  it('every request of the batch malformed, beside a notification: each is answered, nothing runs', async () => {
    const before = cloudRequests();
    const { status, messages } = await post([
      call('a', { name: 'create_project', arguments: 'x' }),
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      call('b'),
    ]);
    expect(status).toBe(200);
    expect(messages).toEqual([
      refused(
        'a',
        'params.arguments',
        "params.arguments is a string where an object is expected (the tool's arguments by name)",
      ),
      refused('b', 'params', "params is missing where an object is expected (the tool's name and its arguments)"),
    ]);
    expect(cloudRequests()).toBe(before);
  });

  it('in a batch refused as a whole, is refused with it: one JSON-RPC error in clear words, and nothing runs', async () => {
    const before = cloudRequests();
    const well = call(9, { name: 'create_project', arguments: { input: { name: 'p' } } });
    const pings = Array.from({ length: 99 }, (_, i) => ({ jsonrpc: '2.0', id: 100 + i, method: 'ping' }));
    const initialize = {
      jsonrpc: '2.0',
      id: 10,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } },
    };
    for (const [batch, said] of [
      [[call(1, { name: 7 }), well, ...pings], 'Invalid Request: Batch must not exceed 100 messages'],
      [[call(1, { name: 7 }), initialize], 'Invalid Request: Only one initialization request is allowed'],
      [[call(1, { name: 7 }), well, 1], 'Bad Request: JSON-RPC batch contains an invalid message'],
    ] as const) {
      const { status, messages } = await post(batch);
      expect(status).toBe(400);
      expect(messages).toEqual([{ jsonrpc: '2.0', id: null, error: { code: -32600, message: said } }]);
    }
    expect(cloudRequests()).toBe(before);
  });
});

describe('a body that is no JSON-RPC request', () => {
  it.each([
    ['invalid JSON', '{"jsonrpc":"2.0","id":1,', 400, -32700, 'Parse error: Invalid JSON'],
    ['not an object', 7, 400, -32600, 'Bad Request: the request body is not a valid JSON-RPC message'],
    [
      'a method that is no string',
      { jsonrpc: '2.0', id: 1, method: 5 },
      400,
      -32600,
      'Bad Request: the request body is not a valid JSON-RPC message',
    ],
    ['an empty batch', [], 400, -32600, 'Bad Request: empty JSON-RPC batch'],
    [
      'a batch holding a non-object',
      [call(1, { name: 'create_project', arguments: { input: { name: 'p' } } }), 'x'],
      400,
      -32600,
      'Bad Request: JSON-RPC batch contains an invalid message',
    ],
    [
      'a batch holding a method that is no string',
      [call(1, { name: 'create_project', arguments: { input: { name: 'p' } } }), { jsonrpc: '2.0', id: 2, method: 5 }],
      400,
      -32600,
      'Bad Request: JSON-RPC batch contains an invalid message',
    ],
  ] as const)('%s: one JSON-RPC error in clear words, and nothing runs', async (_name, body, status, code, message) => {
    const before = cloudRequests();
    const answer = await post(body);
    expect(answer.status).toBe(status);
    expect(answer.messages).toEqual([{ jsonrpc: '2.0', id: null, error: { code, message } }]);
    expect(cloudRequests()).toBe(before);
  });

  it('an unknown method, alone or in a batch: Method not found, with its id; the batch’s other requests run', async () => {
    const alone = await post({ jsonrpc: '2.0', id: 1, method: 'tools/nope' });
    expect(alone.messages).toEqual([{ jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found' } }]);
    const batch = await post([
      { jsonrpc: '2.0', id: 1, method: 'tools/nope' },
      { jsonrpc: '2.0', id: 2, method: 'ping' },
    ]);
    expect(batch.messages).toEqual([
      { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found' } },
      { jsonrpc: '2.0', id: 2, result: {} },
    ]);
  });
});
