// GRAPHQL_COMPILED_MUTATIONS (decisions 087, 099): a cloud creation on POST /graphql's direct path runs as graphql-jit's
// compiled form, and graphql-js answers again from each root field's kept outcome when the compiled answer holds an
// error. Every request goes to two gateways of one configuration, the switch off and on, and the answers must be the
// same bytes (status, every header in order but Date, the body once the ids each gateway's upstream made are
// normalized). Each case also states which way the gateway with the switch on answered (compiled, or graphql-js
// again), so that a case cannot pass by both answers being graphql-js's, and that its upstream got exactly one
// creation request per creation, so that no creation ran twice. The switched-on gateway runs once with the variables
// check (GRAPHQL_VARIABLES_CHECK, src/execution/variables.ts) and once with graphql-js's getVariableValues before each
// compiled run.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { PROJECTS_PATH, SERVICES_PATH } from '../../src/sandbox/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawGraphQL, type RawAnswer } from '../helpers/raw-http.js';

type Raw = RawAnswer;

/** One request over a fresh connection; the raw header list (names as sent, in order) without Date. */
const send = (url: string, body: string): Promise<Raw> =>
  rawGraphQL(url, body, {
    'content-type': 'application/json',
    authorization: 'Bearer app-key',
    'x-request-id': 'same-id',
  });

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g;
/** Ids and times each gateway's upstream makes up on its own; UUIDs and ISO times keep the body's length. */
const normalized = (r: Raw): Raw => ({ ...r, body: r.body.replace(UUID, '<uuid>').replace(TIMESTAMP, '<time>') });

const CREATE_NETWORK =
  'mutation($input: CreateNetworkInput!, $key: UUID) { createNetwork(input: $input, idempotencyKey: $key) { network { id title bandwidthMbps project { name networks { title } } } idempotencyKey upstreamIdempotencyKey replayed } }';
const CREATE_PROJECT =
  'mutation($input: CreateProjectInput!, $key: UUID) { createProject(input: $input, idempotencyKey: $key) { project { id name description } idempotencyKey replayed } }';

describe.each(['true', 'false'])(
  'cloud creations answer the same with and without GRAPHQL_COMPILED_MUTATIONS (GRAPHQL_VARIABLES_CHECK=%s)',
  (variablesCheck) => {
    let off: TestGateway;
    let on: TestGateway;
    /** Each gateway's project, for its createNetwork. */
    const projectOf = new Map<TestGateway, string>();

    beforeAll(async () => {
      [off, on] = await Promise.all([
        startTestGateway({ GATEWAY_API_KEYS: 'app-key', GRAPHQL_COMPILED_MUTATIONS: 'false' }),
        startTestGateway({ GATEWAY_API_KEYS: 'app-key', GRAPHQL_VARIABLES_CHECK: variablesCheck }),
      ]);
      for (const gw of [off, on]) {
        const made = await gw.graphql<any>(CREATE_PROJECT, { input: { name: 'home' } }, { key: 'app-key' });
        projectOf.set(gw, made.data!.createProject.project.id);
      }
    });
    afterAll(async () => {
      await Promise.all([off?.close(), on?.close()]);
    });

    /** POSTs to the cloud sandbox at `path` so far. */
    const creations = (gw: TestGateway, path: string) =>
      gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && r.path === path).length;

    /**
     * The same request to both (each gateway's own project in `input.projectId` when `network`); checks the answers are
     * the same bytes and how the switched-on gateway answered, and returns its answer with what each upstream got.
     */
    async function both(
      query: string,
      variables: (gw: TestGateway) => Record<string, unknown>,
      expected: { way: 'compiled' | 'recompiled' | 'graphql-js'; upstream: number; path?: string },
    ): Promise<{ status: number; body: any }> {
      const path = expected.path ?? SERVICES_PATH;
      const stats = on.gateway.directPath!.stats;
      const before = { compiled: stats.compiled, recompiled: stats.recompiled, direct: stats.direct };
      const calls = [creations(off, path), creations(on, path)];
      const a = await send(off.url, JSON.stringify({ query, variables: variables(off) }));
      const b = await send(on.url, JSON.stringify({ query, variables: variables(on) }));
      expect(normalized(b)).toEqual(normalized(a));
      expect(stats.direct - before.direct, 'the direct path answered').toBe(1);
      const way =
        stats.compiled > before.compiled
          ? 'compiled'
          : stats.recompiled > before.recompiled
            ? 'recompiled'
            : 'graphql-js';
      expect(way).toBe(expected.way);
      expect(creations(off, path) - calls[0]!, 'upstream creations, switch off').toBe(expected.upstream);
      expect(creations(on, path) - calls[1]!, 'upstream creations, switch on').toBe(expected.upstream);
      return { status: b.status, body: JSON.parse(b.body) };
    }

    const network = (input: Record<string, unknown>, key?: string) => (gw: TestGateway) => ({
      input: { projectId: projectOf.get(gw), ...input },
      ...(key ? { key } : {}),
    });

    it('a creation, and its replay with the same key: compiled, one upstream call in all', async () => {
      const key = randomUUID();
      const first = await both(CREATE_NETWORK, network({ title: 'net' }, key), { way: 'compiled', upstream: 1 });
      expect(first.status).toBe(200);
      expect(first.body.errors).toBeUndefined();
      expect(first.body.data.createNetwork).toMatchObject({ idempotencyKey: key, replayed: false });
      expect(first.body.data.createNetwork.network.project.networks).toContainEqual({ title: 'net' });
      const again = await both(CREATE_NETWORK, network({ title: 'net' }, key), { way: 'compiled', upstream: 0 });
      expect(again.body.data.createNetwork).toEqual({ ...first.body.data.createNetwork, replayed: true });
      // Without a key, and a project: compiled too.
      await both(CREATE_NETWORK, network({ title: 'no-key' }), { way: 'compiled', upstream: 1 });
      const project = await both(CREATE_PROJECT, () => ({ input: { name: 'p' }, key: randomUUID() }), {
        way: 'compiled',
        upstream: 1,
        path: PROJECTS_PATH,
      });
      expect(project.body.data.createProject.project).toMatchObject({ name: 'p' });
    });

    it('a key reused with another input: IDEMPOTENCY_KEY_REUSED from graphql-js, no upstream call', async () => {
      const key = randomUUID();
      await both(CREATE_NETWORK, network({ title: 'first' }, key), { way: 'compiled', upstream: 1 });
      const reused = await both(CREATE_NETWORK, network({ title: 'second' }, key), { way: 'recompiled', upstream: 0 });
      expect(reused.body.data).toBeNull();
      expect(reused.body.errors).toHaveLength(1);
      expect(reused.body.errors[0]).toMatchObject({
        path: ['createNetwork'],
        extensions: { code: 'IDEMPOTENCY_KEY_REUSED' },
      });
    });

    it('variables graphql-js refuses: its 400, before anything runs', async () => {
      const missing = await both(CREATE_NETWORK, () => ({}), { way: 'graphql-js', upstream: 0 });
      expect(missing.status).toBe(400);
      const wrong = await both(CREATE_NETWORK, network({ title: 'x', bandwidthMbps: 'fast' }), {
        way: 'graphql-js',
        upstream: 0,
      });
      expect(wrong.status).toBe(400);
      const badKey = await both(CREATE_NETWORK, network({ title: 'x' }, 'not-a-uuid'), {
        way: 'graphql-js',
        upstream: 0,
      });
      expect(badKey.status).toBe(400);
      // graphql-jit's own coercion takes a list where an input object of defaults is expected; graphql-js refuses it,
      // and graphql-js decides (decision 087).
      const user =
        'mutation($input: CreateKafkaUserInput!) { createKafkaUser(input: $input) { kafkaUser { id } replayed } }';
      const list = await both(
        user,
        (gw) => ({
          input: { projectId: projectOf.get(gw), clusterId: randomUUID(), name: 'u', password: 'p', acls: [[]] },
        }),
        { way: 'graphql-js', upstream: 0 },
      );
      expect(list.status).toBe(400);
      expect(list.body.errors[0].message).toContain('to be an object');
    });

    it('an input the gateway refuses before the wire: BAD_USER_INPUT from graphql-js, no upstream call', async () => {
      for (const input of [{ title: '' }, { title: 'x', bandwidthMbps: 0 }]) {
        const refused = await both(CREATE_NETWORK, network(input, randomUUID()), { way: 'recompiled', upstream: 0 });
        expect(refused.body.data).toBeNull();
        expect(refused.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      }
    });

    it('an upstream refusal: UPSTREAM_REJECTED from graphql-js, the upstream called once on each', async () => {
      const body = { code: 'QUOTA', domain: 'network', details: 'no more networks in this project' };
      for (const gw of [off, on]) gw.gateway.sandbox.cloud!.faults.enqueueFor(SERVICES_PATH, { status: 422, body });
      const rejected = await both(CREATE_NETWORK, network({ title: 'over' }, randomUUID()), {
        way: 'recompiled',
        upstream: 1,
      });
      expect(rejected.body.data).toBeNull();
      expect(rejected.body.errors[0]).toMatchObject({
        path: ['createNetwork'],
        extensions: { code: 'UPSTREAM_REJECTED', status: 422 },
      });
    });

    it('a created resource whose id cannot be read: the null propagates as graphql-js propagates it, one call', async () => {
      for (const gw of [off, on]) gw.gateway.sandbox.cloud!.faults.enqueueFor(SERVICES_PATH, 'ok-no-id');
      const key = randomUUID();
      const incomplete = await both(CREATE_NETWORK, network({ title: 'no-id' }, key), {
        way: 'recompiled',
        upstream: 1,
      });
      expect(incomplete.body.data).toBeNull();
      expect(incomplete.body.errors[0].extensions).toMatchObject({
        code: 'UPSTREAM_ANSWER_INCOMPLETE',
        idempotencyKey: key,
      });
      // The same key again: the kept answer, still no second creation.
      await both(CREATE_NETWORK, network({ title: 'no-id' }, key), { way: 'recompiled', upstream: 0 });
      // Without a key (the gateway makes one per call), a second run of the resolver would create a second network.
      for (const gw of [off, on]) gw.gateway.sandbox.cloud!.faults.enqueueFor(SERVICES_PATH, 'ok-no-id');
      await both(CREATE_NETWORK, network({ title: 'no-id, no key' }), { way: 'recompiled', upstream: 1 });
    });

    it('a mutation of two root fields, or with a directive, stays with graphql-js', async () => {
      const two = `mutation($input: CreateNetworkInput!) { a: createNetwork(input: $input) { network { title } } b: createNetwork(input: $input) { replayed } }`;
      const answer = await both(two, network({ title: 'twice' }), { way: 'graphql-js', upstream: 2 });
      expect(answer.body.data.a.network.title).toBe('twice');
      const skipped = `mutation($input: CreateNetworkInput!, $no: Boolean!) { createNetwork(input: $input) @skip(if: $no) { replayed } }`;
      await both(skipped, (gw) => ({ ...network({ title: 'skip' })(gw), no: false }), {
        way: 'graphql-js',
        upstream: 1,
      });
    });
  },
);
