// A document that does not parse or validate is refused over MCP with the code POST /graphql answers it with
// (GRAPHQL_PARSE_FAILED, GRAPHQL_VALIDATION_FAILED) and the same message, never INTERNAL_SERVER_ERROR: the refusal's
// stage names it, for the execute tool as for every MCP path through the pipeline. A limit's refusal keeps its own code
// even when the parse refused it (GRAPHQL_MAX_TOKENS, which MCP used to answer GRAPHQL_PARSE_FAILED).
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
    // Refused while it is parsed, but by a limit, whose code is its own on every transport.
    [
      'is over GRAPHQL_MAX_TOKENS',
      `{ ${Array.from({ length: 1000 }, () => '__typename').join(' ')} }`,
      'GRAPHQL_VALIDATION_FAILED',
      'Token limit of 1000 exceeded. (GRAPHQL_MAX_TOKENS=1000)',
    ],
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
