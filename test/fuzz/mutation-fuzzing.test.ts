import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  type GraphQLArgument,
  type GraphQLInputType,
} from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildSchema } from '../../src/graphql/schema.js';
import { createChain, type Chain } from '../helpers/cloud.js';
import { checkRequest, junkArb, SECRET_RE, secretArb, send, watchUnhandledRejections } from '../helpers/fuzz.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/** Cases per mutation. */
export const MUTATION_RUNS = 100;

/** Codes of a request refused before any work: the store must be as it was. */
const REFUSALS = new Set([
  'BAD_USER_INPUT',
  'GRAPHQL_VALIDATION_FAILED',
  'GRAPHQL_PARSE_FAILED',
  'BAD_REQUEST',
  'UNAUTHENTICATED',
  'IDEMPOTENCY_KEY_REUSED',
  'NOT_FOUND',
]);

const KEY = 'fuzz-app-key-fedcba9876543210';
const unhandled = watchUnhandledRejections();
let gw: TestGateway;
let chain: Chain;
/** One key reused across cases, so that replays and IDEMPOTENCY_KEY_REUSED are reached too. */
const sharedKey = randomUUID();

beforeAll(async () => {
  gw = await startTestGateway({
    GATEWAY_API_KEYS: KEY,
    SANDBOX_CALLBACK_DELAY_MS: '600000',
    LOG_LEVEL: 'debug',
    UPSTREAM_RETRY_BUDGET: '1s',
  });
  chain = await createChain(gw, KEY);
}, 60_000);
afterAll(() => gw.close());

/**
 * Values for a GraphQL input type, read from the schema: mostly well-typed (ids of real resources, enum values,
 * numbers near the spec's bounds), sometimes null, missing or of another JSON type. Fields named password carry a
 * secret-shaped value.
 */
function valueArb(type: GraphQLInputType, name: string, depth: number): fc.Arbitrary<unknown> {
  const typed = typedArb(isNonNullType(type) ? type.ofType : type, name, depth);
  return fc.oneof(
    { weight: 12, arbitrary: typed },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: junkArb },
  );
}

function typedArb(type: GraphQLInputType, name: string, depth: number): fc.Arbitrary<unknown> {
  if (isListType(type))
    return fc.array(valueArb(type.ofType as GraphQLInputType, name, depth + 1), { maxLength: depth > 2 ? 1 : 3 });
  if (isEnumType(type))
    return fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...type.getValues().map((v) => v.name)) },
      { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
    );
  if (isInputObjectType(type)) {
    const fields = type.getFields();
    const model = Object.fromEntries(Object.values(fields).map((f) => [f.name, valueArb(f.type, f.name, depth + 1)]));
    const required = Object.values(fields)
      .filter((f) => isNonNullType(f.type))
      .map((f) => f.name);
    return fc.oneof(
      { weight: 4, arbitrary: fc.record(model, { requiredKeys: required as never[] }) },
      { weight: 1, arbitrary: fc.record(model, { requiredKeys: [] }) },
    );
  }
  if (isScalarType(type)) {
    if (/password/i.test(name)) return secretArb('PW');
    const ids = Object.values(chain);
    switch (type.name) {
      case 'UUID':
        return fc.oneof(fc.constantFrom(...ids), fc.uuid(), fc.string({ maxLength: 40 }));
      case 'ID':
        return fc.oneof(fc.constantFrom(...ids), fc.string({ maxLength: 40 }));
      case 'Int':
        return fc.oneof(fc.integer({ min: -5, max: 600 }), fc.integer());
      case 'Float':
        return fc.oneof(fc.double({ min: -10, max: 100, noNaN: true }), fc.integer());
      case 'Boolean':
        return fc.boolean();
      case 'String':
        return /cidr/i.test(name)
          ? fc.oneof(fc.constantFrom('10.10.0.0/24', '10.0.0.0/8', '192.168.1.0/33'), fc.string({ maxLength: 20 }))
          : /ip$/i.test(name)
            ? fc.oneof(fc.ipV4(), fc.string({ maxLength: 20 }))
            : fc.string({ maxLength: 60 });
      case 'DecimalString':
        return fc.oneof(fc.nat().map(String), fc.nat(), fc.string({ maxLength: 12 }));
      case 'DateTime':
        return fc.oneof(
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
          fc.string({ maxLength: 30 }),
        );
      case 'JSON':
        return fc.oneof(fc.dictionary(fc.string({ maxLength: 10 }), junkArb, { maxKeys: 4 }), junkArb);
      default:
        return fc.oneof(fc.string({ maxLength: 40 }), junkArb);
    }
  }
  return junkArb;
}

/** A valid input per creation mutation (the password is the case's secret): mutating one field of it reaches the checks behind coercion. */
const VALID_INPUTS: Record<string, (c: Chain, password: string) => Record<string, unknown>> = {
  createProject: () => ({ name: 'fuzz' }),
  createNetwork: (c) => ({ projectId: c.projectId, title: 'fuzz-net', bandwidthMbps: 100 }),
  createSubnet: (c) => ({ projectId: c.projectId, networkId: c.networkId, title: 'fuzz-subnet', cidr: '10.77.0.0/24' }),
  createIpAddress: (c) => ({ projectId: c.projectId, networkId: c.networkId, title: 'fuzz-ip' }),
  createKafkaCluster: (c) => ({
    projectId: c.projectId,
    title: 'fuzz-kafka',
    instanceType: 'C2_MEDIUM',
    subnetId: c.subnetId,
    publicIp: '203.0.113.77',
  }),
  createKafkaTopic: (c) => ({
    projectId: c.projectId,
    clusterId: c.clusterId,
    name: 'fuzz-topic',
    partitions: 1,
    replicationFactor: 1,
  }),
  createKafkaUser: (c, password) => ({ projectId: c.projectId, clusterId: c.clusterId, name: 'fuzz-user', password }),
  createVirtualMachine: (c, password) => ({
    projectId: c.projectId,
    title: 'fuzz-vm',
    instanceType: 'C2_MEDIUM',
    bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
    users: [{ name: 'ops', password, sshKeys: [] }],
    networkInterfaces: [{ networkId: c.networkId, subnetId: c.subnetId, ipAddressId: c.ipId }],
  }),
  createIdentification: () => ({
    workflowId: 'wf-fuzz',
    applicantExternalId: 'applicant-1',
    linkLifetimeInMinutes: 30,
  }),
  registerVerification: () => ({ workflowId: 'wf-fuzz', applicant: { lastName: 'Fuzz' } }),
  provisionKafkaCluster: (_c, password) => ({
    project: { name: 'fuzz' },
    network: { title: 'fuzz-net', bandwidthMbps: 100 },
    subnet: { title: 'fuzz-subnet', cidr: '10.78.0.0/24' },
    ipAddress: { title: 'fuzz-ip' },
    cluster: { title: 'fuzz-kafka', instanceType: 'C2_MEDIUM', instanceCount: 3 },
    topics: [{ name: 'orders', partitions: 3, replicationFactor: 3, minInsyncReplicas: 2 }],
    users: [{ name: 'orders-app', password }],
  }),
  provisionVirtualMachine: (c, password) => ({
    projectId: c.projectId,
    networkId: c.networkId,
    subnetId: c.subnetId,
    ipAddress: { title: 'fuzz-vm-ip' },
    virtualMachine: {
      title: 'fuzz-vm',
      instanceType: 'C2_MEDIUM',
      bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
      users: [{ name: 'ops', password, sshKeys: [] }],
    },
  }),
};

function inputArb(mutation: string, arg: GraphQLArgument): fc.Arbitrary<unknown> {
  const schemaDriven = valueArb(arg.type, arg.name, 0);
  const valid = VALID_INPUTS[mutation];
  const type = getNamedType(arg.type);
  if (!valid || !isInputObjectType(type)) return schemaDriven;
  const fields = Object.values(type.getFields());
  const mutated = fc
    .tuple(secretArb('PW'), fc.constantFrom(...fields))
    .chain(([password, field]) =>
      valueArb(field.type, field.name, 1).map((v) => ({ ...valid(chain, password), [field.name]: v })),
    );
  return fc.oneof(
    { weight: 2, arbitrary: schemaDriven },
    { weight: 3, arbitrary: mutated },
    { weight: 1, arbitrary: secretArb('PW').map((pw) => valid(chain, pw)) },
  );
}

function argsArb(mutation: string, args: readonly GraphQLArgument[]): fc.Arbitrary<Record<string, unknown>> {
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const a of args) {
    model[a.name] =
      a.name === 'idempotencyKey'
        ? fc.oneof(
            { weight: 4, arbitrary: fc.uuid() },
            { weight: 2, arbitrary: fc.constant(sharedKey) },
            { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
          )
        : a.name === 'input'
          ? inputArb(mutation, a)
          : valueArb(a.type, a.name, 0);
  }
  return fc.record(model, { requiredKeys: args.filter((a) => isNonNullType(a.type)).map((a) => a.name) as never[] });
}

describe('fuzzing the variables of every mutation over HTTP', () => {
  it(`never answers 5xx, changes nothing when it refuses, and leaks no password (${MUTATION_RUNS} cases per mutation)`, async () => {
    const fields = Object.values(buildSchema([]).getMutationType()!.getFields());
    expect(fields.length).toBeGreaterThanOrEqual(13);
    const outcomes: Record<string, Record<string, number>> = {};
    for (const field of fields) {
      const tally = (outcomes[field.name] = {} as Record<string, number>);
      const declared = field.args.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
      const passed = field.args.map((a) => `${a.name}: $${a.name}`).join(', ');
      const payload = getNamedType(field.type);
      const selection = 'getFields' in payload ? '{ __typename }' : '';
      const query = `mutation${declared ? `(${declared})` : ''} { ${field.name}${passed ? `(${passed})` : ''} ${selection} }`;
      await fc.assert(
        fc.asyncProperty(argsArb(field.name, field.args), async (variables) => {
          const body = JSON.stringify({ query, variables });
          const res = await checkRequest(
            gw,
            () =>
              send(
                gw,
                'POST',
                '/graphql',
                { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
                body,
              ),
            {
              secrets: [KEY, ...(body.match(SECRET_RE) ?? [])],
              refused: (r) => {
                const parsed = JSON.parse(r.text) as {
                  data?: Record<string, unknown> | null;
                  errors?: Array<{ extensions?: { code?: string } }>;
                };
                const code = parsed.errors?.[0]?.extensions?.code;
                return !parsed.data?.[field.name] && code !== undefined && REFUSALS.has(code);
              },
            },
          );
          const parsed = JSON.parse(res.text) as { errors?: Array<{ extensions?: { code?: string; field?: string } }> };
          const first = parsed.errors?.[0]?.extensions;
          // BAD_USER_INPUT with a field is the gateway's own validation; without, graphql-js's coercion.
          const outcome = first
            ? `${first.code}${first.code === 'BAD_USER_INPUT' && first.field ? '(field)' : ''}`
            : 'ok';
          tally[outcome] = (tally[outcome] ?? 0) + 1;
        }),
        { numRuns: MUTATION_RUNS },
      );
    }
    console.info('mutation fuzzing, outcomes per mutation:', JSON.stringify(outcomes));
    expect(unhandled()).toEqual([]);
    expect(gw.logs().match(SECRET_RE)).toBeNull();
    // Every mutation was reached past the GraphQL layer at least once (an outcome other than a coercion failure).
    for (const [name, tally] of Object.entries(outcomes)) {
      expect(
        Object.keys(tally).some((code) => code !== 'BAD_USER_INPUT' && code !== 'GRAPHQL_VALIDATION_FAILED'),
        `${name}: ${JSON.stringify(tally)}`,
      ).toBe(true);
    }
  }, 600_000);
});
