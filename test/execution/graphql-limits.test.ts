import { randomUUID } from 'node:crypto';
import { getIntrospectionQuery, parse } from 'graphql';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { DEFAULT_QUERY, graphiqlExamples } from '../../src/server/graphiql-examples.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { storeCounts, storeSnapshot } from '../helpers/store.js';

const gateway = gatewaysPerTest();
const KEY = 'limits-app-key';

/** Upstream requests the sandbox received: every refusal below must leave it at zero. */
const upstreamCalls = (gw: TestGateway) => gw.gateway.sandbox.cloud!.requests.length;

const createProject = (alias: string, extra = '') =>
  `${alias}: createProject(input: { name: "p-${alias}" }) { project { id ${extra} } }`;
const aliases = (n: number) => `mutation { ${Array.from({ length: n }, (_, i) => createProject(`a${i}`)).join(' ')} }`;
const nested = (depth: number) => {
  // __type(name) { fields { type { ofType { ofType ... { name } } } } }: introspection outside __schema counts.
  let inner = 'name';
  for (let i = 0; i < depth - 3; i++) inner = `ofType { ${inner} }`;
  return `{ __type(name: "Query") { fields { type { ${inner} } } } }`;
};

/** One operation per limit that exceeds its default, and whose refusal must leave the upstream untouched. */
const OVER_DEFAULT = [
  { limit: 'GRAPHQL_MAX_ALIASES', max: 15, query: aliases(16), message: /Aliases limit of 15 exceeded, found 16/ },
  {
    limit: 'GRAPHQL_MAX_DEPTH',
    max: 6,
    query: `mutation { createProject(input: { name: "deep" }) { project { networks { subnets { network { subnets { id } } } } } } }`,
    message: /Query depth limit of 6 exceeded, found 7/,
  },
  {
    limit: 'GRAPHQL_MAX_TOKENS',
    max: 1000,
    query: `mutation { ${createProject('t', Array.from({ length: 1000 }, () => '__typename').join(' '))} }`,
    message: /Token limit of 1000 exceeded/,
  },
  {
    limit: 'GRAPHQL_MAX_DIRECTIVES',
    max: 50,
    query: `mutation { ${createProject('d', Array.from({ length: 51 }, () => '__typename @include(if: true)').join(' '))} }`,
    message: /Directives limit of 50 exceeded, found 51/,
  },
  {
    limit: 'GRAPHQL_MAX_COST',
    max: 5000,
    query: `mutation { createProject(input: { name: "c" }) { project { networks { subnets { id cidr title description } ipAddresses { id address } } } } }`,
    message: /Query Cost limit of 5000 exceeded/,
    env: { GRAPHQL_LIST_SIZE_ESTIMATE: '50' },
  },
] as const;

describe('abuse limits on GraphQL operations', () => {
  it('refuses a query with 200 aliases of one field, naming the limit and its value', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const query = `{ ${Array.from({ length: 200 }, (_, i) => `f${i}: __typename`).join(' ')} }`;
    const res = await gw.graphql(query, undefined, { key: KEY });
    expect(res.status).toBe(400);
    expect(res.data).toBeUndefined();
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]!.message).toBe('Aliases limit of 15 exceeded, found 200. (GRAPHQL_MAX_ALIASES=15)');
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'GRAPHQL_VALIDATION_FAILED',
      limit: 'GRAPHQL_MAX_ALIASES',
      max: 15,
    });
  });

  it.each(OVER_DEFAULT)(
    'refuses an operation over the default $limit with a named error, and runs nothing',
    async ({ limit, max, query, message, ...rest }) => {
      const gw = await gateway({ GATEWAY_API_KEYS: KEY, ...('env' in rest ? rest.env : {}) });
      const before = await storeSnapshot(gw);
      const res = await gw.graphql(query, undefined, { key: KEY });
      expect(res.status).toBe(400);
      expect(res.data).toBeUndefined();
      expect(res.errors![0]!.message).toMatch(message);
      expect(res.errors![0]!.message).toContain(`(${limit}=${max})`);
      expect(res.errors![0]!.extensions).toMatchObject({ code: 'GRAPHQL_VALIDATION_FAILED', limit, max });
      expect(upstreamCalls(gw)).toBe(0);
      expect(await storeSnapshot(gw)).toEqual(before);
    },
  );

  it.each([
    { variable: 'GRAPHQL_MAX_ALIASES', value: '2', query: aliases(3), within: aliases(2) },
    {
      variable: 'GRAPHQL_MAX_DEPTH',
      value: '2',
      query: `mutation { createProject(input: { name: "x" }) { project { id } } }`,
      within: `mutation { createProject(input: { name: "x" }) { idempotencyKey } }`,
    },
    {
      variable: 'GRAPHQL_MAX_TOKENS',
      value: '23',
      query: `mutation { ${createProject('x', 'name description __typename __typename')} }`,
      within: `mutation { ${createProject('x')} }`,
    },
    {
      variable: 'GRAPHQL_MAX_DIRECTIVES',
      value: '1',
      query: `mutation { ${createProject('x', 'name @include(if: true) description @skip(if: false)')} }`,
      within: `mutation { ${createProject('x', 'name @include(if: true)')} }`,
    },
    {
      variable: 'GRAPHQL_MAX_COST',
      value: '5',
      query: `mutation { createProject(input: { name: "x" }) { project { id name } idempotencyKey } }`,
      within: `mutation { createProject(input: { name: "x" }) { idempotencyKey } }`,
    },
  ])(
    '$variable=$value lowers the limit: over it is refused before any upstream call, within it runs',
    async ({ variable, value, query, within }) => {
      const gw = await gateway({ GATEWAY_API_KEYS: KEY, [variable]: value });
      const refused = await gw.graphql(query, undefined, { key: KEY });
      expect(refused.status).toBe(400);
      expect(refused.errors![0]!.extensions).toMatchObject({ limit: variable, max: Number(value) });
      expect(refused.errors![0]!.message).toContain(`(${variable}=${value})`);
      expect(upstreamCalls(gw)).toBe(0);
      expect((await storeCounts(gw)).idempotency_records).toBe(0);
      const accepted = await gw.graphql(within, undefined, { key: KEY });
      expect(accepted.errors, JSON.stringify(accepted.errors)).toBeUndefined();
      expect(upstreamCalls(gw)).toBeGreaterThan(0);
    },
  );

  it('counts the directives on every spread of a fragment, as on every inline fragment', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const create = 'createProject(input: { name: "directives" }) { project { id } }';
    const spreads = (n: number) =>
      `mutation { ${Array.from({ length: n }, () => '...P @skip(if: false) @include(if: true)').join(' ')} }
      fragment P on Mutation { ${create} }`;
    const inline = (n: number) =>
      `mutation { ${Array.from({ length: n }, () => `... on Mutation @skip(if: false) @include(if: true) { ${create} }`).join(' ')} }`;
    for (const query of [spreads(26), inline(26)]) {
      const res = await gw.graphql(query, undefined, { key: KEY });
      expect(res.status, JSON.stringify(res)).toBe(400);
      expect(res.errors).toHaveLength(1);
      expect(res.errors![0]!.message).toBe('Directives limit of 50 exceeded, found 52. (GRAPHQL_MAX_DIRECTIVES=50)');
      expect(res.errors![0]!.extensions).toMatchObject({ code: 'GRAPHQL_VALIDATION_FAILED', max: 50 });
    }
    expect(upstreamCalls(gw)).toBe(0);
    // Within the limit, the fragment's spreads are one selection: one creation.
    const within = await gw.graphql(spreads(25), undefined, { key: KEY });
    expect(within.errors).toBeUndefined();
    expect(upstreamCalls(gw)).toBe(1);
  });

  it('estimates list sizes from first: a variable page size decides the cost, per request', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const query = `query($n: Int) { projects(first: $n) { id networks { id subnets { id cidr } ipAddresses { id } } kafkaClusters { id topics { name } users { name } } } }`;
    const small = await gw.graphql(query, { n: 5 }, { key: KEY });
    expect(small.errors, JSON.stringify(small.errors)).toBeUndefined();
    const large = await gw.graphql(query, { n: 500 }, { key: KEY });
    expect(large.status).toBe(400);
    expect(large.errors![0]!.message).toMatch(
      /^Query Cost limit of 5000 exceeded, found \d+\. \(GRAPHQL_MAX_COST=5000\)$/,
    );
    // Omitted, the page size is the schema's default (50): the same nesting is too costly.
    const byDefault = await gw.graphql(query, {}, { key: KEY });
    expect(byDefault.errors![0]!.extensions!.limit).toBe('GRAPHQL_MAX_COST');
  });

  it("counts a variable left out at its own default, which is what runs, not the argument's", async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    // Run with first: 500 (the variable's default), not 50 (the argument's): 46500 points, as with { n: 500 }.
    const pages = `query($n: Int = 500) { projects(first: $n) { id networks { id subnets { id } } } }`;
    const refused = await gw.graphql(pages, {}, { key: KEY });
    expect(refused.status).toBe(400);
    expect(refused.errors![0]!.message).toBe('Query Cost limit of 5000 exceeded, found 46500. (GRAPHQL_MAX_COST=5000)');
    expect((await gw.graphql(pages, { n: 5 }, { key: KEY })).errors).toBeUndefined();
    // A list variable's default holds elements too: one point each, and the list's size, as when they are sent.
    const small = await gateway({ GATEWAY_API_KEYS: KEY, GRAPHQL_MAX_COST: '200' });
    const ids = Array.from({ length: 100 }, (_, i) => `id-${i}`);
    const results = `query($ids: [ID!]! = [${ids.map((id) => `"${id}"`).join(' ')}]) { verificationResults(externalIds: $ids) { externalId } }`;
    const sent = await small.graphql(results, { ids }, { key: KEY });
    expect(sent.errors![0]!.extensions).toMatchObject({ limit: 'GRAPHQL_MAX_COST', max: 200 });
    const calls = small.gateway.sandbox.verification!.requests.length;
    const byDefault = await small.graphql(results, {}, { key: KEY });
    expect(byDefault.errors?.[0]?.message).toBe(sent.errors![0]!.message);
    expect(small.gateway.sandbox.verification!.requests.length).toBe(calls);
  });

  it('estimates verificationResults by the number of ids asked for', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY, GRAPHQL_MAX_COST: '200' });
    const query = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }`;
    const few = await gw.graphql(query, { ids: ['a', 'b'] }, { key: KEY });
    expect(few.errors?.find((e) => e.extensions?.limit)).toBeUndefined();
    const calls = gw.gateway.sandbox.verification!.requests.length;
    const many = await gw.graphql(query, { ids: Array.from({ length: 500 }, (_, i) => `id-${i}`) }, { key: KEY });
    expect(many.errors![0]!.extensions).toMatchObject({ limit: 'GRAPHQL_MAX_COST', max: 200 });
    expect(gw.gateway.sandbox.verification!.requests.length).toBe(calls);
  });

  it.each(['true', 'false'])(
    'counts a list at the most rows its field returns, not at a larger first (GRAPHQL_COST_FORMULA=%s)',
    async (formula) => {
      const gw = await gateway({ GATEWAY_API_KEYS: KEY, GRAPHQL_COST_FORMULA: formula });
      // projects and mobileIdRejections return at most 500 rows: first: 2000 runs as first: 500, so it costs as
      // much (3 x 500 and 4 x 500 points), under the 5,000 that 2000 rows would have been over.
      for (const [query, variables] of [
        ['{ projects(first: 2000) { id } }', undefined],
        ['query($n: Int) { projects(first: $n) { id } }', { n: 2000 }],
        ['query($n: Int = 2000) { projects(first: $n) { id } }', {}],
        ['{ mobileIdRejections(first: 2000) { authReqId reason } }', undefined],
        ['query($n: Int) { mobileIdRejections(first: $n) { authReqId reason } }', { n: 1_000_000 }],
      ] as const) {
        const res = await gw.graphql(query, variables, { key: KEY });
        expect(res.errors, `${query} ${JSON.stringify(res.errors)}`).toBeUndefined();
      }
      // Capped or not, a selection whose 500 rows cost more than the limit is still refused, and counted at 500.
      const deep = await gw.graphql('{ projects(first: 2000) { id networks { id subnets { id } } } }', undefined, {
        key: KEY,
      });
      expect(deep.errors![0]!.message).toBe('Query Cost limit of 5000 exceeded, found 46500. (GRAPHQL_MAX_COST=5000)');
    },
  );

  it.each([
    { name: 'the default introspection query', query: getIntrospectionQuery() },
    {
      name: "GraphiQL's introspection query (descriptions, deprecations, one-of, specifiedBy, repeatable)",
      query: getIntrospectionQuery({
        descriptions: true,
        inputValueDeprecation: true,
        schemaDescription: true,
        oneOf: true,
        specifiedByUrl: true,
        directiveIsRepeatable: true,
      }),
    },
  ])('lets $name through every limit', async ({ query }) => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const res = await gw.graphql(query, undefined, { key: KEY });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    expect(res.data!.__schema.types.length).toBeGreaterThan(50);
  });

  it("lets GraphiQL's default query and every saved example through the limits", async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const documents = [DEFAULT_QUERY, ...graphiqlExamples({ sandbox: true }).map((e) => e.query)];
    for (const text of documents) {
      for (const op of parse(text).definitions) {
        if (op.kind !== 'OperationDefinition' || !op.name) continue;
        // Validation only (variables missing on purpose would run nothing): the limits run before execution.
        const res = await gw.graphql(
          text,
          { key: randomUUID(), id: 'x', externalId: 'x', externalIds: ['x'], authReqId: 'x' },
          { key: KEY, headers: {} },
        );
        const limited = (res.errors ?? []).filter((e) => e.extensions?.limit);
        expect(limited, `${op.name.value}: ${JSON.stringify(limited)}`).toEqual([]);
        break;
      }
    }
  });

  it('refuses a body over GRAPHQL_MAX_BODY_BYTES with 413, naming the limit, and runs nothing', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY, GRAPHQL_MAX_BODY_BYTES: '2048' });
    const res = await request(`${gw.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({
        query: `mutation($d: String) { ${createProject('big')} }`,
        variables: { d: 'x'.repeat(4096) },
      }),
    });
    expect(res.statusCode).toBe(413);
    const body = (await res.body.json()) as any;
    expect(body.errors[0].message).toBe('request body exceeds 2048 bytes (GRAPHQL_MAX_BODY_BYTES=2048)');
    expect(body.errors[0].extensions).toMatchObject({ limit: 'GRAPHQL_MAX_BODY_BYTES', max: 2048 });
    expect(upstreamCalls(gw)).toBe(0);
  });

  it('refuses a batched request (a JSON array of operations) and runs none of them', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const op = { query: `mutation { ${createProject('batch')} }` };
    const res = await request(`${gw.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify([op, op]),
    });
    expect(res.statusCode).toBe(400);
    expect(((await res.body.json()) as any).errors[0].message).toMatch(/batching disabled/i);
    expect(upstreamCalls(gw)).toBe(0);
  });
});

describe('CSRF prevention', () => {
  const mutation = `mutation { ${createProject('csrf')} }`;

  it('refuses a mutation sent as GET, with or without a preflight header', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const url = `${gw.url}/graphql?query=${encodeURIComponent(mutation)}`;
    const plain = await request(url, { headers: { authorization: `Bearer ${KEY}` } });
    expect(plain.statusCode).toBe(400);
    expect(await plain.body.text()).toMatch(/Cross-Site Request Forgery/);
    const preflighted = await request(url, {
      headers: { authorization: `Bearer ${KEY}`, 'apollo-require-preflight': 'true', accept: 'application/json' },
    });
    expect(preflighted.statusCode).toBe(405);
    expect(((await preflighted.body.json()) as any).errors[0].message).toMatch(
      /GET requests only support query operations/,
    );
    expect(upstreamCalls(gw)).toBe(0);
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'])(
    'refuses a mutation POSTed as %s without a preflight header, and runs nothing',
    async (contentType) => {
      const gw = await gateway({ GATEWAY_API_KEYS: KEY });
      const res = await request(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': contentType, authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ query: mutation }),
      });
      expect(res.statusCode).toBe(400);
      expect(await res.body.text()).toMatch(/Cross-Site Request Forgery/);
      expect(upstreamCalls(gw)).toBe(0);
    },
  );

  it('still runs the same mutation POSTed as application/json', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const res = await gw.graphql(mutation, undefined, { key: KEY });
    expect(res.errors).toBeUndefined();
    expect(upstreamCalls(gw)).toBe(1);
  });
});

describe('abuse limits on subscriptions over WebSocket', () => {
  const subscription = (selection: string) =>
    `subscription { mobileIdAuthentication(authReqId: "ws-limit") { ${selection} } }`;

  it.each([
    {
      limit: 'GRAPHQL_MAX_ALIASES',
      query: subscription(Array.from({ length: 16 }, (_, i) => `t${i}: __typename`).join(' ')),
    },
    { limit: 'GRAPHQL_MAX_TOKENS', query: subscription(Array.from({ length: 1000 }, () => '__typename').join(' ')) },
    {
      limit: 'GRAPHQL_MAX_DIRECTIVES',
      query: subscription(Array.from({ length: 51 }, () => '__typename @skip(if: false)').join(' ')),
    },
    {
      limit: 'GRAPHQL_MAX_DEPTH',
      query: `subscription { provisioningProgress(id: "x") { steps { resource { ... on Project { networks { subnets { network { id } } } } } } } }`,
    },
  ])('refuses a subscription over $limit with the same named error as HTTP', async ({ limit, query }) => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const client = wsClient(gw, { key: KEY });
    try {
      const sub = collect(client, query, {});
      await sub.done;
      expect(sub.results).toEqual([]);
      const errors = sub.errors[0] as Array<{ message: string; extensions?: Record<string, unknown> }>;
      expect(errors[0]!.extensions).toMatchObject({ code: 'GRAPHQL_VALIDATION_FAILED', limit });
      expect(errors[0]!.message).toContain(`(${limit}=`);
    } finally {
      await client.dispose();
    }
  });

  it('closes a WebSocket whose message is over GRAPHQL_MAX_BODY_BYTES (1009), before reading it as an operation', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY, GRAPHQL_MAX_BODY_BYTES: '2048' });
    const socket = new WebSocket(gw.url.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws');
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
    socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${KEY}` } }));
    socket.send(
      JSON.stringify({
        id: '1',
        type: 'subscribe',
        payload: { query: `subscription { heartbeat(count: 1) }`, variables: { pad: 'x'.repeat(4096) } },
      }),
    );
    expect(await closed).toBe(1009);
  });

  it('refuses a subscription whose cost with its variables is over GRAPHQL_MAX_COST', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY, GRAPHQL_MAX_COST: '3' });
    const client = wsClient(gw, { key: KEY });
    try {
      const sub = collect(
        client,
        `subscription($id: String!) { mobileIdAuthentication(authReqId: $id) { __typename ... on MobileIdAuthenticated { authReqId subject } } }`,
        { id: 'x' },
      );
      await sub.done;
      const errors = sub.errors[0] as Array<{ extensions?: Record<string, unknown> }>;
      expect(errors[0]!.extensions).toMatchObject({ limit: 'GRAPHQL_MAX_COST', max: 3 });
    } finally {
      await client.dispose();
    }
  });
});

describe('abuse limits on subscriptions over Server-Sent Events', () => {
  it.each([
    {
      limit: 'GRAPHQL_MAX_ALIASES',
      query: `subscription { mobileIdAuthentication(authReqId: "sse-limit") { ${Array.from({ length: 16 }, (_, i) => `t${i}: __typename`).join(' ')} } }`,
    },
    {
      limit: 'GRAPHQL_MAX_TOKENS',
      query: `subscription { mobileIdAuthentication(authReqId: "sse-limit") { ${Array.from({ length: 1000 }, () => '__typename').join(' ')} } }`,
    },
    { limit: 'GRAPHQL_MAX_COST', query: `query { projects(first: 500) { networks { subnets { id } } } }` },
  ])('refuses an operation over $limit on /graphql/stream with the same named error', async ({ limit, query }) => {
    const gw = await gateway({ GATEWAY_API_KEYS: KEY });
    const res = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ query }),
    });
    const text = await res.body.text();
    const next = /event: next\ndata: (.*)\n/.exec(text);
    expect(next, text).not.toBeNull();
    const payload = JSON.parse(next![1]!) as {
      errors: Array<{ message: string; extensions: Record<string, unknown> }>;
    };
    expect(payload.errors[0]!.extensions).toMatchObject({ code: 'GRAPHQL_VALIDATION_FAILED', limit });
    expect(payload.errors[0]!.message).toContain(`(${limit}=`);
  });
});
