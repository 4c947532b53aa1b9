// A document that does not parse or validate is refused over MCP with the code POST /graphql answers it with
// (GRAPHQL_PARSE_FAILED, GRAPHQL_VALIDATION_FAILED) and the same message, never INTERNAL_SERVER_ERROR: the refusal's
// stage names it, for the execute tool as for every MCP path through the pipeline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, textOf, type TestMcpClient } from '../../helpers/mcp.js';

let gw: TestGateway;
let operator: TestMcpClient;
beforeAll(async () => {
  gw = await startTestGateway({
    GATEWAY_API_KEYS: 'alpha:key-a',
    OPERATOR_API_KEYS: 'ops:key-op',
    MCP_EXECUTE: 'true',
  });
  operator = await mcpClient(gw, { key: 'key-op' });
});
afterAll(async () => {
  await operator?.close();
  await gw?.close();
});

describe('MCP refuses a document that does not parse or validate as POST /graphql does', () => {
  it.each([
    [
      'does not validate',
      '{ nope }',
      'GRAPHQL_VALIDATION_FAILED',
      'Cannot query field "nope" on type "Query". Did you mean "node"?',
    ],
    ['does not parse', '{ projects { id ', 'GRAPHQL_PARSE_FAILED', 'Syntax Error: Expected Name, found <EOF>.'],
  ])('a query that %s is a tool error with the code and message POST answers', async (_what, query, code, message) => {
    const post = await gw.graphql(query, {}, { key: 'key-op' });
    expect(post.status).toBe(400);
    expect(post.errors).toEqual([expect.objectContaining({ message, extensions: expect.objectContaining({ code }) })]);

    const result = await operator.call('execute', { query });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({ errors: [{ message, code }] });
    expect(textOf(result)).toBe(message);
  });
});
