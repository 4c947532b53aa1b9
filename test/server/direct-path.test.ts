// POST /graphql with and without cached plans (decision 035): every kind of request goes to two gateways of the
// same configuration, one answering through Apollo's pipeline alone (directPath: false), one with plans, and the
// answers must be the same bytes: status, every response header in order (but Date), body. Each case also
// states which path the planned gateway took, so that a case cannot pass by both answers being Apollo's.
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { IDENTIFICATIONS_PATH } from '../../src/sandbox/identification.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { rawGraphQL, type RawAnswer } from '../helpers/raw-http.js';
import { waitFor } from '../helpers/wait.js';

type Raw = RawAnswer;

/** One request over a fresh connection; the raw header list (names as sent, in order) without Date. */
const send = rawGraphQL;

const JSON_HEADERS = {
  'content-type': 'application/json',
  authorization: 'Bearer app-key',
  'x-request-id': 'same-id',
};
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g;

/** Ids and times the two gateways make up each on their own (created resources); everything else stays. */
const normalized = (r: Raw): Raw => ({
  ...r,
  // The body's length changes with the ids' only if they differ in length: UUIDs and ISO times do not.
  body: r.body.replace(UUID, '<uuid>').replace(TIMESTAMP, '<time>'),
});

/** Two gateways of one configuration, with the direct path on and off, started for the enclosing describe. */
function pairOf(gatewayEnv: Record<string, string>) {
  const pair = {} as {
    apollo: TestGateway;
    direct: TestGateway;
    both: typeof both;
  };
  beforeAll(async () => {
    [pair.apollo, pair.direct] = await Promise.all([
      startTestGateway(gatewayEnv, { testing: { directPath: false } }),
      startTestGateway(gatewayEnv),
    ]);
    expect(pair.apollo.gateway.directPath).toBeNull();
    expect(pair.direct.gateway.directPath).not.toBeNull();
  });
  afterAll(async () => {
    await Promise.all([pair.apollo?.close(), pair.direct?.close()]);
  });

  /** Sends the same request to both; returns the planned gateway's answer after checking it equals Apollo's. */
  async function both(
    body: unknown,
    options: {
      headers?: Record<string, string>;
      path: 'direct' | 'apollo';
      normalize?: boolean;
      method?: string;
      /** A query string (from its `?`), for GET. */
      search?: string;
    },
  ): Promise<Raw> {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    const headers = { ...JSON_HEADERS, ...options.headers };
    const plans = pair.direct.gateway.directPath!;
    const before = { ...plans.stats };
    const a = await send(pair.apollo.url, text, headers, options.method, options.search);
    const p = await send(pair.direct.url, text, headers, options.method, options.search);
    const took = plans.stats.direct > before.direct ? 'direct' : 'apollo';
    expect(took, `path of ${text}`).toBe(options.path);
    if (options.normalize) expect(normalized(p)).toEqual(normalized(a));
    else expect(p).toEqual(a);
    return p;
  }
  pair.both = both;
  return pair;
}

describe('POST /graphql answers the same with and without cached plans', () => {
  const pair = pairOf({ GATEWAY_API_KEYS: 'app-key' });
  const both = (...args: Parameters<typeof pair.both>) => pair.both(...args);

  it('a query: data, and the content type negotiated from Accept', async () => {
    const q = { query: '{ projects { id name } }' };
    const plain = await both(q, { path: 'direct' });
    expect(plain.status).toBe(200);
    expect(plain.headers).toContain('content-type: application/json; charset=utf-8');
    expect(plain.headers).toContain('cache-control: no-store');
    expect(plain.headers).toContain('x-request-id: same-id');
    const gql = await both(q, {
      path: 'direct',
      headers: { accept: 'application/graphql-response+json' },
    });
    expect(gql.headers).toContain('content-type: application/graphql-response+json; charset=utf-8');
    await both(q, {
      path: 'direct',
      headers: {
        accept: 'application/graphql-response+json, application/json;q=0.9',
      },
    });
    await both(q, {
      path: 'direct',
      headers: {
        accept: 'application/json;q=0.5, application/graphql-response+json',
      },
    });
    await both(q, { path: 'direct', headers: { accept: '*/*' } });
    await both(q, { path: 'direct', headers: { accept: '' } });
    await both(q, {
      path: 'direct',
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    // No JSON type acceptable: Apollo's 406.
    expect((await both(q, { path: 'apollo', headers: { accept: 'text/html' } })).status).toBe(406);
  });

  it('variables, operationName, extensions and null members as Apollo reads them', async () => {
    const two = 'query A { projects { id } } query B { __typename }';
    await both({ query: two, operationName: 'B' }, { path: 'direct' });
    await both({ query: two, operationName: 'A', variables: null, extensions: null }, { path: 'direct' });
    await both(
      {
        query: '{ __typename }',
        operationName: null,
        extensions: { client: 'x' },
      },
      { path: 'direct' },
    );
    await both(
      {
        query: 'query($n: Int) { projects(first: $n) { id } }',
        variables: { n: 2 },
      },
      { path: 'direct' },
    );
    // Apollo's answers, given by the direct path: no operation picked (several operations and no name), an unknown name.
    expect((await both({ query: two }, { path: 'direct' })).status).toBe(400);
    expect((await both({ query: two, operationName: 'C' }, { path: 'direct' })).status).toBe(400);
  });

  it('a variable that cannot be coerced: 400 BAD_USER_INPUT from the direct path, value not echoed', async () => {
    const bad = await both(
      {
        query: 'query($n: Int) { projects(first: $n) { id } }',
        variables: { n: 'many' },
      },
      { path: 'direct' },
    );
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const secret = await both(
      {
        query: 'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
        variables: { input: { name: 1, password: 'hunter2' } },
      },
      { path: 'direct' },
    );
    expect(secret.status).toBe(400);
    expect(secret.body).not.toContain('hunter2');
    await both({ query: 'query($id: ID!) { project(id: $id) { id } }' }, { path: 'direct' });
  });

  it('resolver errors: a failed mutation, with data null and its path', async () => {
    const failed = await both(
      {
        query:
          'mutation { createNetwork(input: { projectId: "3fa85f64-5717-4562-b3fc-2c963f66afa6", title: "n" }) { network { id } } }',
      },
      { path: 'direct' },
    );
    expect(failed.status).toBe(200);
    expect(JSON.parse(failed.body).errors).toHaveLength(1);
    await both(
      {
        query: '{ project(id: "3fa85f64-5717-4562-b3fc-2c963f66afa6") { id name } }',
      },
      { path: 'direct' },
    );
  });

  it('a created resource, and warnings in extensions', async () => {
    const created = await both(
      {
        query: 'mutation { createProject(input: { name: "same" }) { project { id name createdAt } } }',
      },
      { path: 'direct', normalize: true },
    );
    expect(JSON.parse(created.body).data.createProject.project.name).toBe('same');
    for (const gw of [pair.apollo, pair.direct])
      gw.gateway.sandbox.identification!.faults.enqueueFor(IDENTIFICATIONS_PATH, {
        alter: (b) => ({ ...(b as object), url: 'not a url' }),
      });
    const warned = await both(
      {
        query:
          'mutation { createIdentification(input: { workflowId: "wf-plan" }) { identification { id url } replayed } }',
      },
      { path: 'direct', normalize: true },
    );
    expect(JSON.parse(warned.body).extensions.warnings[0].missing).toEqual(['url']);
  });

  it('the project tree: compiled by graphql-jit, and graphql-js again when the compiled answer holds an error', async () => {
    const plans = pair.direct.gateway.directPath!;
    const projects: string[] = [];
    for (const gw of [pair.apollo, pair.direct]) {
      const p = await gw.graphql<any>(
        'mutation { createProject(input: { name: "tree" }) { project { id } } }',
        {},
        { key: 'app-key' },
      );
      const projectId = p.data!.createProject.project.id as string;
      for (const title of ['a', 'b']) {
        const n = await gw.graphql<any>(
          'mutation($input: CreateNetworkInput!) { createNetwork(input: $input) { network { id } } }',
          { input: { projectId, title } },
          { key: 'app-key' },
        );
        await gw.graphql(
          'mutation($input: CreateSubnetInput!) { createSubnet(input: $input) { subnet { id } } }',
          {
            input: { projectId, networkId: n.data!.createNetwork.network.id, title: `s-${title}`, cidr: '10.0.0.0/24' },
          },
          { key: 'app-key' },
        );
      }
      projects.push(projectId);
    }
    const tree =
      'query($id: ID!) { project(id: $id) { id name createdAt networks { id title project { name } subnets { id cidr network { title } } } } }';
    // Each gateway gets its own project's id: the bodies differ only by ids, which are normalized.
    const treeOf = async (vars: (i: number) => Record<string, unknown>, query = tree) => {
      const before = { ...plans.stats };
      const a = await send(pair.apollo.url, JSON.stringify({ query, variables: vars(0) }), JSON_HEADERS);
      const p = await send(pair.direct.url, JSON.stringify({ query, variables: vars(1) }), JSON_HEADERS);
      expect(normalized(p)).toEqual(normalized(a));
      return {
        answer: p,
        compiled: plans.stats.compiled - before.compiled,
        recompiled: plans.stats.recompiled - before.recompiled,
      };
    };
    const ok = await treeOf((i) => ({ id: projects[i] }));
    expect(ok.compiled).toBe(1);
    expect(JSON.parse(ok.answer.body).data.project.networks).toHaveLength(2);
    const list = await treeOf(
      () => ({}),
      '{ projects(first: 5) { name networks { title subnets { cidr } } } __typename }',
    );
    expect(list.compiled).toBe(1);
    // graphql-js decides on the variables: a missing or wrong one is its 400.
    const missing = await treeOf(() => ({}));
    expect(missing.answer.status).toBe(400);
    expect(missing.compiled + missing.recompiled).toBe(0);
    // An unknown id is null, not an error.
    const unknown = await treeOf(() => ({ id: '3fa85f64-5717-4562-b3fc-2c963f66afa6' }));
    expect(JSON.parse(unknown.answer.body)).toEqual({ data: { project: null } });
    // A ledger row that breaks the schema (no title, no bandwidth, an enum value that does not exist): the errors,
    // their paths and the nulls they propagate are graphql-js's, because graphql-js answers again.
    for (const [i, gw] of [pair.apollo, pair.direct].entries()) {
      await gw.gateway.services.ledger.record({
        id: randomUUID(),
        kind: 'network',
        projectId: projects[i]!,
        parentId: null,
        title: null,
        spec: { defaultFirewallAction: 'NOPE' },
        response: {},
        idempotencyKey: null,
        createdBy: 'test',
      });
    }
    const broken = await treeOf(
      (i) => ({ id: projects[i] }),
      'query($id: ID!) { project(id: $id) { name networks { title bandwidthMbps defaultFirewallAction } } }',
    );
    expect(broken.recompiled).toBe(1);
    const body = JSON.parse(broken.answer.body);
    expect(body.data).toEqual({ project: null });
    expect(body.errors.length).toBeGreaterThanOrEqual(1);
    // The same through the whole tree query, and a nullable parent (network.project) keeps its siblings.
    expect((await treeOf((i) => ({ id: projects[i] }))).recompiled).toBe(1);
  });

  it('refusals the direct path answers as Apollo does: bad documents, limits, the cost, subscriptions, the key', async () => {
    expect((await both({ query: '{ projects { id ' }, { path: 'direct' })).status).toBe(400);
    expect((await both({ query: '{ noSuchField }' }, { path: 'direct' })).status).toBe(400);
    expect((await both({ query: '{ noSuchField other: alsoMissing }' }, { path: 'direct' })).status).toBe(400);
    const aliases = `{ ${Array.from({ length: 20 }, (_, i) => `a${i}: __typename`).join(' ')} }`;
    expect((await both({ query: aliases }, { path: 'direct' })).status).toBe(400);
    expect(
      (
        await both(
          {
            query: '{ projects(first: 100000) { id networks { id subnets { id } } } }',
          },
          { path: 'direct' },
        )
      ).status,
    ).toBe(400);
    // Subscriptions run over WebSocket and SSE: refused before anything runs, as a request error.
    const subscription = await both(
      {
        query: 'subscription { mobileIdAuthentication(authReqId: "x") { __typename } }',
      },
      { path: 'direct' },
    );
    expect(subscription.status).toBe(400);
    expect(JSON.parse(subscription.body).errors[0].extensions.code).toBe('BAD_REQUEST');
    expect((await both({ query: '{ __typename }' }, { path: 'direct', headers: { authorization: '' } })).status).toBe(
      401,
    );
    expect(
      (await both({ query: '{ __typename }' }, { path: 'direct', headers: { authorization: 'Bearer nope' } })).status,
    ).toBe(401);
  });

  it('requests Apollo answers: APQ, malformed bodies, batches, other content types, GET', async () => {
    await both(
      {
        query: '{ __typename }',
        extensions: {
          persistedQuery: { version: 1, sha256Hash: 'ab'.repeat(32) },
        },
      },
      { path: 'apollo' },
    );
    await both(
      {
        extensions: {
          persistedQuery: { version: 1, sha256Hash: 'ab'.repeat(32) },
        },
      },
      { path: 'apollo' },
    );
    await both({ query: '' }, { path: 'apollo' });
    await both({ query: '{ __typename }', variables: '{}' }, { path: 'apollo' });
    await both({ query: '{ __typename }', operationName: 1 }, { path: 'apollo' });
    await both({ query: '{ __typename }', extensions: [] }, { path: 'apollo' });
    await both([{ query: '{ __typename }' }], { path: 'apollo' });
    await both('null', { path: 'apollo' });
    await both({}, { path: 'apollo' });
    // Not JSON content: CSRF prevention, or Apollo's own reading of the body (neither reaches the plans).
    await both('{ __typename }', {
      path: 'apollo',
      headers: { 'content-type': 'text/plain' },
    });
    await both(JSON.stringify({ query: '{ __typename }' }), {
      path: 'apollo',
      headers: { 'content-type': 'application/graphql-response+json' },
    });
    // Not counted at all: GET never reaches the plans.
    const before = { ...pair.direct.gateway.directPath!.stats };
    const a = await send(pair.apollo.url, '', { ...JSON_HEADERS, 'content-type': '' }, 'GET');
    const p = await send(pair.direct.url, '', { ...JSON_HEADERS, 'content-type': '' }, 'GET');
    expect(p).toEqual(a);
    expect(pair.direct.gateway.directPath!.stats).toEqual(before);
  });
});

describe('POST /graphql at the edges of GraphQL over HTTP answers the same with and without cached plans', () => {
  const pair = pairOf({ GATEWAY_API_KEYS: 'app-key', GRAPHQL_INTROSPECTION: 'false' });
  const P = '3fa85f64-5717-4562-b3fc-2c963f66afa6';
  const NET = 'mutation($input: CreateNetworkInput!) { createNetwork(input: $input) { network { id } } }';
  const q = { query: '{ __typename }' };
  const CASES: Array<[string, unknown, 'direct' | 'apollo', Record<string, string>?]> = [
    [
      'Accept with q-values',
      q,
      'direct',
      { accept: 'application/json;q=0.8, application/graphql-response+json;q=0.9' },
    ],
    ['Accept application/*', q, 'direct', { accept: 'application/*' }],
    ['Accept json;q=0', q, 'apollo', { accept: 'application/json;q=0' }],
    ['Content-Type in capitals, odd parameters', q, 'direct', { 'content-type': 'Application/JSON;;' }],
    ['operationName ""', { ...q, operationName: '' }, 'direct'],
    ['two anonymous operations', { query: '{ __typename } { __typename }' }, 'direct'],
    ['extensions.persistedQuery null', { ...q, extensions: { persistedQuery: null } }, 'apollo'],
    ['variables false', { ...q, variables: false }, 'apollo'],
    ['query false', { query: false }, 'apollo'],
    ['a number', 1, 'apollo'],
    ['duplicate keys', '{"query":"{ nope }","query":"{ __typename }"}', 'direct'],
    ['a fragment cycle', { query: '{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }' }, 'direct'],
    ['introspection off', { query: '{ __schema { queryType { name } } }' }, 'direct'],
    ['no suggestion', { query: '{ projects(firs: 1) { id } }' }, 'direct'],
    [
      'too deep',
      { query: '{ projects { networks { project { networks { project { networks { id } } } } } } }' },
      'direct',
    ],
    [
      'Int past 2^53',
      { query: 'query($n: Int) { projects(first: $n) { id } }', variables: { n: 2 ** 53 + 2 } },
      'direct',
    ],
    ['-0', { query: 'query($n: Int) { projects(first: $n) { id } }', variables: { n: -0 } }, 'direct'],
    ['1e400', '{"query":"query($n: Int) { projects(first: $n) { id } }","variables":{"n":1e400}}', 'direct'],
    [
      'enum value lowercase',
      { query: NET, variables: { input: { projectId: P, title: 't', region: 'msk' } } },
      'direct',
    ],
    [
      'enum literal as a string',
      {
        query: `mutation { createNetwork(input: { projectId: "${P}", title: "t", region: "MSK" }) { network { id } } }`,
      },
      'direct',
    ],
    ['a UUID in braces', { query: NET, variables: { input: { projectId: `{${P}}`, title: 't' } } }, 'direct'],
    [
      'a lone surrogate',
      { query: 'query($id: ID!) { project(id: $id) { id } }', variables: { id: '\ud800' } },
      'direct',
    ],
    ['NUL in a variable', { query: NET, variables: { input: { projectId: P, title: 'a\u0000' } } }, 'direct'],
    ['null for non-null', { query: NET, variables: { input: { projectId: P, title: null } } }, 'direct'],
    ['an extra variable', { query: '{ __typename }', variables: { x: 1 } }, 'direct'],
  ];
  it.each(CASES)('%s', async (_name, body, path, headers) => {
    await pair.both(body, { path, headers });
  });
});

describe('trusted documents enforced: no valid credential, a 401 whatever the document, on both paths', () => {
  const KNOWN = 'query Known { __typename }';
  const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
  const manifest = path.join(tempDataDir('manifest-'), 'persisted-documents.json');
  fs.writeFileSync(manifest, JSON.stringify({ [sha1(KNOWN)]: KNOWN }));
  const pair = pairOf({
    GATEWAY_API_KEYS: 'app-key',
    TRUSTED_DOCUMENTS: 'enforce',
    TRUSTED_DOCUMENTS_MANIFEST: manifest,
  });
  const apq = (hash: string) => ({ persistedQuery: { version: 1, sha256Hash: hash } });
  // What a caller could try to learn about the manifest; each is answered as the others, before any of it is read.
  const BODIES: Array<[string, unknown, 'direct' | 'apollo']> = [
    ['an unknown documentId', { documentId: sha1('{ projects { id } }') }, 'apollo'],
    ['a known documentId', { documentId: sha1(KNOWN) }, 'apollo'],
    ['the known hash', { extensions: apq(sha256(KNOWN)) }, 'apollo'],
    ['an unknown hash', { extensions: apq('ab'.repeat(32)) }, 'apollo'],
    ['a hash that does not match its text', { query: KNOWN, extensions: apq('ab'.repeat(32)) }, 'apollo'],
    ["the manifest's text", { query: KNOWN }, 'direct'],
    ['a text outside the manifest', { query: '{ projects { id } }' }, 'direct'],
    ['a documentId and a query', { documentId: sha1(KNOWN), query: KNOWN }, 'direct'],
    ['extensions that are not an object', { extensions: 'x' }, 'apollo'],
    ['a batch', [{ documentId: sha1(KNOWN) }, { query: '{ projects { id } }' }], 'apollo'],
  ];
  const GETS: Array<[string, Record<string, string>]> = [
    ['a known documentId', { documentId: sha1(KNOWN) }],
    ['an unknown documentId', { documentId: sha1('{ projects { id } }') }],
    ['an unknown hash', { extensions: JSON.stringify(apq('ab'.repeat(32))) }],
    ['a text outside the manifest', { query: '{ projects { id } }' }],
  ];

  for (const [credential, authorization] of [
    ['no credential', ''],
    ['a wrong key', 'Bearer nope'],
  ] as const) {
    it(`${credential}: UNAUTHENTICATED for every POST body and GET, one answer for all of them`, async () => {
      const answers: Raw[] = [];
      for (const [name, body, path] of BODIES) {
        const answer = await pair.both(body, { path, headers: { authorization } });
        expect({ name, status: answer.status }).toEqual({ name, status: 401 });
        expect(JSON.parse(answer.body).errors.map((e: any) => e.extensions.code)).toEqual(['UNAUTHENTICATED']);
        answers.push(answer);
      }
      for (const [name, params] of GETS) {
        const answer = await pair.both('', {
          path: 'apollo',
          method: 'GET',
          search: `?${new URLSearchParams(params)}`,
          headers: { authorization },
        });
        expect({ name, status: answer.status }).toEqual({ name, status: 401 });
        answers.push(answer);
      }
      // No answer tells a known document from an unknown one.
      for (const answer of answers) expect(answer).toEqual(answers[0]);
    });
  }

  it('with the key, the trusted documents answer as before, the same on both paths', async () => {
    const run = await pair.both({ documentId: sha1(KNOWN) }, { path: 'direct' });
    expect(JSON.parse(run.body)).toEqual({ data: { __typename: 'Query' } });
    const unknown = await pair.both({ documentId: sha1('{ projects { id } }') }, { path: 'apollo' });
    expect(JSON.parse(unknown.body).errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    const outside = await pair.both({ query: '{ projects { id } }' }, { path: 'apollo' });
    expect(JSON.parse(outside.body).errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    const byGet = await pair.both('', {
      path: 'apollo',
      method: 'GET',
      search: `?${new URLSearchParams({ documentId: sha1(KNOWN) })}`,
    });
    expect(JSON.parse(byGet.body)).toEqual({ data: { __typename: 'Query' } });
  });
});

describe('POST /graphql under rate limits answers the same with and without cached plans', () => {
  const pair = pairOf({
    GATEWAY_API_KEYS: 'app-key',
    RATE_LIMIT_CREATIONS: '2/1h',
    RATE_LIMIT_READS: '100/1h',
  });
  const both = (...args: Parameters<typeof pair.both>) => pair.both(...args);
  it('the rate limit: the direct path spends the points and answers 429 with Retry-After as Apollo does', async () => {
    const create = {
      query: 'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { name } } }',
      variables: { input: { name: 'limited' } },
    };
    // Reads are limited too (generously): admission runs for every operation.
    await both({ query: '{ projects { name } }' }, { path: 'direct' });
    // Each gateway's window starts with its first creation. The first creations are sent to both at once, and so are
    // the refused ones below: the two windows then start, and are read, about as far apart, and the seconds they have
    // left differ by a rounding however long a loaded machine takes over one request. Sent one after the other, the
    // windows' starts were a creation's round trip apart, and a round trip of over a second made them differ by two.
    const stats = pair.direct.gateway.directPath!.stats;
    let before = stats.direct;
    const [firstA, firstP] = await Promise.all([
      send(pair.apollo.url, JSON.stringify(create), JSON_HEADERS),
      send(pair.direct.url, JSON.stringify(create), JSON_HEADERS),
    ]);
    expect(stats.direct).toBe(before + 1);
    expect(firstP.status).toBe(200);
    expect(firstP).toEqual(firstA);
    expect((await both(create, { path: 'direct' })).status).toBe(200);
    before = stats.direct;
    const [limitedA, limitedP] = await Promise.all([
      send(pair.apollo.url, JSON.stringify(create), JSON_HEADERS),
      send(pair.direct.url, JSON.stringify(create), JSON_HEADERS),
    ]);
    expect(stats.direct).toBe(before + 1);
    expect(limitedP.status).toBe(429);
    // The seconds left of each gateway's own window may differ by one.
    const retry = (r: Raw) => Number(r.headers.find((h) => h.startsWith('retry-after: '))!.slice(13));
    expect(Math.abs(retry(limitedP) - retry(limitedA))).toBeLessThanOrEqual(1);
    const same = (r: Raw) => ({
      ...r,
      headers: r.headers.map((h) => (h.startsWith('retry-after: ') ? 'retry-after: <s>' : h)),
      body: r.body.replace(/\d+ seconds?/g, '<s>'),
    });
    expect(same(limitedP)).toEqual(same(limitedA));
  });
});

describe('the operation span is the same through both paths', () => {
  let gws: Array<{ gw: TestGateway; spans: () => ReadableSpan[] }> = [];
  beforeAll(async () => {
    gws = await Promise.all(
      [false, true].map(async (directPath) => {
        const exporter = new InMemorySpanExporter();
        const gw = await startTestGateway(
          { GATEWAY_API_KEYS: 'equivalence:app-key' },
          { testing: { traceExporter: exporter, directPath } },
        );
        return { gw, spans: () => exporter.getFinishedSpans() };
      }),
    );
  });
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.gw.close()));
  });

  const spanOf = async (g: { gw: TestGateway; spans: () => ReadableSpan[] }, body: unknown) => {
    const n = g.spans().length;
    const res = await send(g.gw.url, JSON.stringify(body), JSON_HEADERS);
    const span = await waitFor(
      () =>
        g
          .spans()
          .slice(n)
          .find((s) => s.attributes['gateway.route'] === 'graphql'),
      20_000,
      'the span of the request',
    );
    return {
      res,
      name: span.name,
      attributes: span.attributes,
      status: span.status,
    };
  };

  it('names it after the operation and records error codes', async () => {
    expect(gws[1]!.gw.gateway.directPath).not.toBeNull();
    for (const body of [
      { query: 'query Projects { projects { id } }' },
      { query: '{ __typename }' },
      {
        query: 'query($n: Int) { projects(first: $n) { id } }',
        variables: { n: 'x' },
      },
      {
        query:
          'mutation Fail { createNetwork(input: { projectId: "3fa85f64-5717-4562-b3fc-2c963f66afa6", title: "n" }) { network { id } } }',
      },
      { query: 'subscription Refused { heartbeat(count: 1) }' },
    ]) {
      const [a, p] = [await spanOf(gws[0]!, body), await spanOf(gws[1]!, body)];
      expect(p).toEqual(a);
    }
    expect(gws[1]!.gw.gateway.directPath!.stats.direct).toBe(5);
  });
});

describe('Apollo GraphOS reporting turns the cached plans off', () => {
  it('with APOLLO_SCHEMA_REPORTING set, every POST /graphql goes through Apollo and the start-up log says why', async () => {
    const gw = await startTestGateway({ GATEWAY_API_KEYS: 'app-key', APOLLO_SCHEMA_REPORTING: 'true' });
    try {
      expect(gw.gateway.directPath).toBeNull();
      expect(gw.logs()).toContain(
        'the direct path of POST /graphql is off: APOLLO_SCHEMA_REPORTING makes Apollo Server install plugins of its own',
      );
      const res = await gw.graphql('{ __typename }', undefined, { key: 'app-key' });
      expect(res.data).toEqual({ __typename: 'Query' });
    } finally {
      await gw.close();
    }
  });
});
