// A variable graphql-js cannot coerce is the client's error on every transport (docs/contract.md, BAD_USER_INPUT):
// the same message on POST /graphql, graphql-ws and graphql-sse, for a query and for a subscription, the variable and
// the reason named (the whole value left out of graphql-js's "got invalid value <value>"), and nothing logged as
// unexpected. graphql-ws and graphql-sse coerce the variables in the run; their presenter now marks such an error as
// HTTP's does (src/execution/present.ts `markedVariableError`), where they used to answer it as INTERNAL_SERVER_ERROR.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver } from '../helpers/operation.js';

const KEY = 'bad-variables-every-transport-key';
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(async () => {
  await gw?.close();
});

/** The errors of one operation's first answer over `transport` (undefined when it has none). */
async function errorsOf(
  transport: 'post' | 'ws' | 'sse',
  query: string,
  variables: Record<string, unknown>,
): Promise<Array<{ message: string; extensions?: Record<string, unknown> }>> {
  return (await operationOver(transport, gw, KEY, { query, variables })).errors!;
}

const QUERY = 'query($id: ID!) { project(id: $id) { id } }';
const SUBSCRIPTION = 'subscription($id: String!) { mobileIdAuthentication(authReqId: $id) { __typename } }';

const CASES = [
  {
    what: 'a value of the wrong type',
    variables: { id: true },
    message: /^Variable "\$id" got invalid value; (ID|String) cannot represent/,
  },
  {
    what: 'a required variable missing',
    variables: {},
    message: /^Variable "\$id" of required type "(ID|String)!" was not provided\.$/,
  },
  {
    what: 'null for a non-null variable',
    variables: { id: null },
    message: /^Variable "\$id" of non-null type "(ID|String)!" must not be null\.$/,
  },
];

describe.each(['post', 'ws', 'sse'] as const)('a variable graphql-js cannot coerce, over %s', (transport) => {
  it.each(CASES)('is BAD_USER_INPUT for $what', async ({ variables, message }) => {
    const operations = transport === 'post' ? [QUERY] : [QUERY, SUBSCRIPTION];
    for (const query of operations) {
      const before = gw.logs().length;
      const errors = await errorsOf(transport, query, variables);
      expect(errors, `${query} over ${transport}`).toHaveLength(1);
      expect(errors[0]!.message).toMatch(message);
      expect(errors[0]!.extensions?.code).toBe('BAD_USER_INPUT');
      // docs/contract.md: BAD_USER_INPUT names the offending field, in words and in extensions.field.
      expect(errors[0]!.extensions?.field).toBe('id');
      // A client's mistake is not logged as an unexpected error.
      expect(gw.logs().slice(before)).not.toContain('unexpected error in a GraphQL operation');
    }
  });
});

// Inside an input object, the field named is the place in the variable, as the gateway's own refusals name it.
const NESTED = 'mutation($input: CreateNetworkInput!) { createNetwork(input: $input) { network { id } } }';
const PROJECT = '3fa85f64-5717-4562-b3fc-2c963f66afa6';
const NESTED_CASES = [
  {
    what: 'a value of the wrong type',
    input: { projectId: PROJECT, title: 'n', bandwidthMbps: 1.5 },
    field: 'input.bandwidthMbps',
  },
  {
    what: 'a field the type does not define',
    input: { projectId: PROJECT, title: 'n', speed: 1 },
    field: 'input.speed',
  },
  { what: 'a required field missing', input: { projectId: PROJECT }, field: 'input.title' },
  { what: 'null for a non-null field', input: { projectId: PROJECT, title: null }, field: 'input.title' },
  {
    what: 'an enum value in the wrong case',
    input: { projectId: PROJECT, title: 'n', region: 'msk' },
    field: 'input.region',
  },
];

describe.each(['post', 'ws', 'sse'] as const)('a nested value graphql-js cannot coerce, over %s', (transport) => {
  it.each(NESTED_CASES)('is BAD_USER_INPUT naming $field for $what', async ({ input, field }) => {
    const errors = await errorsOf(transport, NESTED, { input });
    expect(errors).toHaveLength(1);
    expect(errors[0]!.extensions?.code).toBe('BAD_USER_INPUT');
    expect(errors[0]!.extensions?.field).toBe(field);
  });
});

// A nullable variable with a default may stand where a value is required (graphql-js's validation allows it for the
// default's sake), but a null given for it is refused by graphql-js only in the run, at the field, as an error of the
// gateway's (INTERNAL_SERVER_ERROR, its words hidden): the pipeline refuses it first, as the client's, naming it.
const DEFAULTED = [
  {
    what: "a directive's argument",
    query: 'query($id: ID!, $v: Boolean = true) { project(id: $id) @include(if: $v) { id } }',
    type: 'Boolean!',
  },
  {
    what: "a directive's argument in a fragment",
    query:
      'query($id: ID!, $v: Boolean = true) { ...P } fragment P on Query { project(id: $id) @include(if: $v) { id } }',
    type: 'Boolean!',
  },
  {
    what: "a field's argument",
    query:
      'mutation($id: String!, $v: SandboxMobileIdOutcome = SUCCESS) { sandboxCompleteMobileIdAuthentication(authReqId: $id, outcome: $v) { __typename } }',
    type: 'SandboxMobileIdOutcome!',
  },
  {
    what: "a subscription field's argument",
    query: 'subscription($v: String = "defaulted-null-1") { mobileIdAuthentication(authReqId: $v) { __typename } }',
    type: 'String!',
    streamingOnly: true,
  },
];

describe.each(['post', 'ws', 'sse'] as const)(
  'a null for a defaulted variable where a value is required, over %s',
  (transport) => {
    it.each(DEFAULTED.filter((c) => transport !== 'post' || !c.streamingOnly))(
      'is BAD_USER_INPUT naming it, for $what, and nothing runs',
      async ({ query, type }) => {
        const before = gw.logs().length;
        const errors = await errorsOf(transport, query, { id: 'defaulted-null-1', v: null });
        expect(errors).toHaveLength(1);
        expect(errors[0]!.message).toBe(
          `Variable "$v" must not be null: it is used where a value of type "${type}" is required (leave it out for its default); nothing was run`,
        );
        expect(errors[0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'v' });
        expect(gw.logs().slice(before)).not.toContain('unexpected error in a GraphQL operation');
      },
    );
  },
);

it('a defaulted variable left out, or given a value, is not refused', async () => {
  const query = DEFAULTED[0]!.query;
  for (const variables of [{ id: 'defaulted-null-2' }, { id: 'defaulted-null-2', v: false }])
    expect(await errorsOf('post', query, variables), JSON.stringify(variables)).toBeUndefined();
});
