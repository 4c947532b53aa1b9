// A document that does not parse, or does not validate, is named by the stage that refused it on every transport
// (docs/contract.md, Error codes: GraphQL errors carry `extensions.code`): GRAPHQL_PARSE_FAILED and
// GRAPHQL_VALIDATION_FAILED, with graphql-js's words and locations, over POST and GET /graphql, graphql-ws and
// graphql-sse alike, for a query and for a subscription. graphql-ws and graphql-sse used to send graphql-js's errors
// with no code at all. Apollo's status travels in `extensions.http` only inside the HTTP path, never on a wire.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type Transport } from '../helpers/operation.js';

const KEY = 'refused-documents-every-transport-key';
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(async () => {
  await gw?.close();
});

const CASES = [
  {
    what: 'a query that does not parse',
    query: '{ projects { id ',
    code: 'GRAPHQL_PARSE_FAILED',
    message: 'Syntax Error: Expected Name, found <EOF>.',
  },
  {
    what: 'a query naming a field the schema lacks',
    query: '{ noSuchField }',
    code: 'GRAPHQL_VALIDATION_FAILED',
    message: /^Cannot query field "noSuchField" on type "Query"\./,
  },
  {
    what: 'a subscription that does not parse',
    query: 'subscription { mobileIdAuthentication(authReqId: "x") { ',
    code: 'GRAPHQL_PARSE_FAILED',
    message: 'Syntax Error: Expected Name, found <EOF>.',
  },
  {
    what: 'a subscription naming a field the schema lacks',
    query: 'subscription { noSuchField }',
    code: 'GRAPHQL_VALIDATION_FAILED',
    message: /^Cannot query field "noSuchField" on type "Subscription"\./,
  },
];

// GET and POST /graphql refuse a subscription before they parse it only when it parses: both are asked here anyway,
// since a document that does not parse or validate is refused as such whatever it would have been.
describe.each(['post', 'get', 'ws', 'sse'] as Transport[])('a refused document, over %s', (transport) => {
  it.each(CASES)('is named by its stage: $what', async ({ query, code, message }) => {
    const before = gw.logs().length;
    const answer = await operationOver(transport, gw, KEY, { query });
    const errors = answer.errors!;
    expect(errors, answer.raw).toHaveLength(1);
    expect(errors[0]!.message).toMatch(message);
    expect(errors[0]!.extensions, answer.raw).toEqual({ code });
    expect(errors[0]!.locations).toEqual([expect.objectContaining({ line: 1 })]);
    if (transport === 'post' || transport === 'get') expect(answer.status).toBe(400);
    // A client's mistake is not logged as an unexpected error.
    expect(gw.logs().slice(before)).not.toContain('unexpected error in a GraphQL operation');
  });
});
