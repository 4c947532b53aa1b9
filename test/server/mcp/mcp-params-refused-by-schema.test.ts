// Any request whose params the MCP schema refuses (resources/read with a number for its uri, initialize with none of
// its fields, tools/list with a number for its cursor, ...) is answered -32602 in the gateway's words, naming the
// field, with its own id, alone or in a JSON-RPC batch, at the 2025 revisions and at 2026-07-28, and nothing runs: not
// -32603 with a dump of the schema's issues. The same requests well formed are served as they always were. Over real
// HTTP, with raw requests.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CATALOG_URI } from '../../../src/server/mcp/resources.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { pointsAllowed, RAW_META, rawMcpPost } from '../../helpers/mcp.js';

const KEY = 'params-refused-by-schema-key-0123456789';
let gw: TestGateway;
beforeAll(async () => {
  // A read of a resource spends a point of its app's reads budget: the points show whether one ran.
  gw = await startTestGateway({ GATEWAY_API_KEYS: `agent:${KEY}`, RATE_LIMIT_READS: '1000/1h' });
});
afterAll(() => gw.close());

/** POSTs `body` to /mcp (with `headers`): the status, and every JSON-RPC message of the answer, SSE or JSON. */
const post = (body: unknown, headers: Record<string, string> = {}) => rawMcpPost(gw, KEY, body, headers);

/** The reads points the app has been allowed: each resource read spends one. */
const readsSpent = () => pointsAllowed(gw, 'agent', 'reads');

const message = (id: number | string, method: string, params?: unknown) => ({
  jsonrpc: '2.0',
  id,
  method,
  ...(params === undefined ? {} : { params }),
});

const refused = (id: number | string, field: string, said: string) => ({
  jsonrpc: '2.0',
  id,
  error: { code: -32602, message: `Invalid params: ${said}`, data: { field } },
});

const INITIALIZE = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } };

const cases = [
  [
    'resources/read, its uri a number',
    message(1, 'resources/read', { uri: 5 }),
    refused(1, 'params.uri', "params.uri is a number where a string is expected (the resource's URI)"),
  ],
  [
    'resources/read, no uri',
    message(2, 'resources/read', {}),
    refused(
      2,
      'params.uri',
      'params.uri is missing: name the resource to read (resources/list and resources/templates/list show those this app may read)',
    ),
  ],
  [
    'initialize, its params empty',
    message(3, 'initialize', {}),
    refused(
      3,
      'params.protocolVersion',
      'params.protocolVersion is missing where a string is expected (the protocol revision the client speaks, such as "2025-11-25")',
    ),
  ],
  [
    'initialize, the client named by a number',
    message(4, 'initialize', { ...INITIALIZE, clientInfo: { name: 5, version: '1' } }),
    refused(4, 'params.clientInfo.name', 'params.clientInfo.name is a number where a string is expected'),
  ],
  [
    'tools/list, its cursor a number',
    message('five', 'tools/list', { cursor: 5 }),
    refused('five', 'params.cursor', 'params.cursor is a number where a string is expected'),
  ],
  [
    'resources/list, its cursor an object',
    message(6, 'resources/list', { cursor: {} }),
    refused(6, 'params.cursor', 'params.cursor is an object where a string is expected'),
  ],
  [
    'resources/templates/list, its cursor a boolean',
    message(7, 'resources/templates/list', { cursor: true }),
    refused(7, 'params.cursor', 'params.cursor is a boolean where a string is expected'),
  ],
  [
    'resources/subscribe, its uri null',
    message(8, 'resources/subscribe', { uri: null }),
    refused(8, 'params.uri', 'params.uri is null where a string is expected'),
  ],
] as const;

describe('a request whose params the schema refuses', () => {
  it.each(cases)('%s: -32602 naming the field, alone and in a batch, and nothing runs', async (_name, sent, answer) => {
    const before = await readsSpent();
    const alone = await post(sent);
    expect(alone.status, alone.text).toBe(200);
    expect(alone.messages).toEqual([answer]);
    const batch = await post([sent]);
    expect(batch.status, batch.text).toBe(200);
    expect(batch.messages).toEqual([answer]);
    expect(await readsSpent()).toBe(before);
  });

  it('in a batch of every method, each is answered with its own id, and the well-formed ones are served', async () => {
    const before = await readsSpent();
    const { status, text, messages } = await post([
      ...cases.filter(([name]) => !name.startsWith('initialize')).map(([, sent]) => sent),
      message(20, 'ping'),
      message(21, 'resources/read', { uri: CATALOG_URI }),
      message(22, 'tools/list'),
    ]);
    expect(status, text).toBe(200);
    const byId = new Map(messages.map((m) => [m.id, m]));
    for (const [name, sent, answer] of cases)
      if (!name.startsWith('initialize')) expect(byId.get(sent.id)).toEqual(answer);
    expect(byId.get(20)).toEqual({ jsonrpc: '2.0', id: 20, result: {} });
    expect(byId.get(21)!.result.contents[0].uri).toBe(CATALOG_URI);
    expect(byId.get(22)!.result.tools.length).toBeGreaterThan(0);
    expect(messages).toHaveLength(cases.length - 2 + 3);
    // Only the well-formed read ran.
    expect(await readsSpent()).toBe(before + 1);
  });

  it('at 2026-07-28 too: resources/read with a number for its uri names the field', async () => {
    const before = await readsSpent();
    const { status, text, messages } = await post(message(9, 'resources/read', { _meta: RAW_META, uri: 5 }), {
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'resources/read',
    });
    expect(status, text).toBe(200);
    expect(messages).toEqual([
      refused(9, 'params.uri', "params.uri is a number where a string is expected (the resource's URI)"),
    ]);
    expect(await readsSpent()).toBe(before);
  });
});

describe('the same requests well formed', () => {
  it('are served as before, alone and in a batch', async () => {
    const initialized = await post(message(1, 'initialize', INITIALIZE));
    expect(initialized.messages[0]!.result.serverInfo.name).toBe('graphql-gateway');
    const batch = await post([message(2, 'initialize', INITIALIZE)]);
    expect(batch.messages[0]!.result.protocolVersion).toBe('2025-06-18');

    const before = await readsSpent();
    const { messages } = await post([
      message(3, 'tools/list', {}),
      message(4, 'resources/list', {}),
      message(5, 'resources/templates/list', {}),
      message(6, 'resources/read', { uri: CATALOG_URI }),
      message(7, 'resources/subscribe', { uri: CATALOG_URI }),
      message(8, 'tools/call', { name: 'catalog', arguments: {} }),
      message(9, 'ping', {}),
    ]);
    const byId = new Map(messages.map((m) => [m.id, m]));
    expect(byId.get(3)!.result.tools.length).toBeGreaterThan(0);
    expect(byId.get(4)!.result.resources.map((r: { uri: string }) => r.uri)).toContain(CATALOG_URI);
    expect(byId.get(5)!.result.resourceTemplates.length).toBeGreaterThan(0);
    expect(byId.get(6)!.result.contents[0].uri).toBe(CATALOG_URI);
    // A 2025 client's subscribe is told that this endpoint keeps no session, as before.
    expect(byId.get(7)!.error).toMatchObject({ code: -32601 });
    expect(byId.get(7)!.error.message).toMatch(/^resources\/subscribe is not served/);
    expect(byId.get(8)!.result.isError).toBeFalsy();
    expect(byId.get(8)!.result.structuredContent.catalog).toBeDefined();
    expect(byId.get(9)).toEqual({ jsonrpc: '2.0', id: 9, result: {} });
    expect(await readsSpent()).toBeGreaterThan(before);
  });
});
