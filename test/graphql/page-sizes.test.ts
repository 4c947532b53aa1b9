// One rule for every list's page size (`first`) and offset: a size below 1 (or a negative offset) is refused,
// BAD_USER_INPUT with `extensions.field` naming the argument, never read as the smallest page; a size above the most
// the schema says a list returns is answered with that many at most.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver } from '../helpers/operation.js';

const OPERATOR = 'page-sizes-operator-key-01';
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: 'shop:page-sizes-app-key-01', OPERATOR_API_KEYS: OPERATOR });
});
afterAll(async () => {
  await gw?.close();
});

const LISTS = [
  { field: 'projects', max: 500, query: 'query($n: Int) { projects(first: $n) { id } }' },
  { field: 'mobileIdRejections', max: 500, query: 'query($n: Int) { mobileIdRejections(first: $n) { id } }' },
  { field: 'pendingAgentPlans', max: 1000, query: 'query($n: Int) { pendingAgentPlans(first: $n) { id } }' },
  { field: 'agentAudit', max: 1000, query: 'query($n: Int) { agentAudit(first: $n) { planId } }' },
];

describe.each(LISTS)('$field', ({ field, max, query }) => {
  it.each([-1, 0])('refuses first: %i with BAD_USER_INPUT naming first', async (n) => {
    const res = await gw.graphql(query, { n }, { key: OPERATOR });
    expect(res.data, JSON.stringify(res)).toBeNull();
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]).toMatchObject({ path: [field], extensions: { code: 'BAD_USER_INPUT', field: 'first' } });
    expect(res.errors![0]!.message).toMatch(/^first: must be 1 or more/);
  });

  it('refuses a negative first written in the document as it refuses one in a variable', async () => {
    const res = await gw.graphql(`{ ${field}(first: -3) { __typename } }`, {}, { key: OPERATOR });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'first' });
  });

  it('answers a size above its bound, and one not given', async () => {
    // 10 x the bound, at 3 points a row, is over GRAPHQL_MAX_COST's 5,000: the list is counted at its bound.
    for (const n of [max + 1, 10 * max, undefined]) {
      const res = await gw.graphql(query, n === undefined ? {} : { n }, { key: OPERATOR });
      expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
      expect(res.data![field]).toEqual([]);
    }
  });
});

describe('projects(offset)', () => {
  it('refuses a negative offset with BAD_USER_INPUT naming offset', async () => {
    const res = await gw.graphql('{ projects(offset: -1) { id } }', {}, { key: OPERATOR });
    expect(res.errors?.[0]).toMatchObject({
      path: ['projects'],
      extensions: { code: 'BAD_USER_INPUT', field: 'offset' },
    });
  });
});

describe('pendingAgentPlansChanged (a subscription)', () => {
  it.each(['ws', 'sse'] as const)('over %s refuses first: -1 with BAD_USER_INPUT naming first', async (transport) => {
    const { raw, errors } = await operationOver(transport, gw, OPERATOR, {
      query: 'subscription { pendingAgentPlansChanged(first: -1) { id } }',
    });
    expect(errors, raw).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'BAD_USER_INPUT', field: 'first' }) }),
    ]);
  });
});
