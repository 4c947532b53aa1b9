// The idempotency promise of every cloud creation (docs/contract.md, Idempotency) on every transport that runs a
// mutation: POST /graphql on the direct path and on Apollo's, graphql-ws, and SSE in both modes (GET refuses a
// mutation and sends nothing). Per creation and transport: a retry with the same key and an equal input written
// differently (fields in another order, defaults given, ids and the key in capitals, text the gateway trims, numbers
// as decimal strings, literals instead of variables) replays the first answer; another input with the key is
// IDEMPOTENCY_KEY_REUSED; and the upstream got one creation under the key. A retry over another transport than the
// first call (an app whose socket dropped) replays too.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import { createChain, M, SSH_KEY, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { graphqlLiteral, MUTATION_SURFACES, operationOver, type Answer, type Transport } from '../helpers/operation.js';

type Input = Record<string, unknown>;

interface Creation {
  /** The root field, and its query in M. */
  field: string;
  query: string;
  /** The first call's input; an equal one written differently; another one. */
  input: (c: Chain, n: string) => Input;
  same: (c: Chain, n: string) => Input;
  other: (c: Chain, n: string) => Input;
}

const up = (id: string) => id.toUpperCase();

const vm = (c: Chain) => ({
  projectId: c.projectId,
  title: 'vm',
  instanceType: 'C2_MEDIUM',
  bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
  users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
  networkInterfaces: [{ networkId: c.networkId, subnetId: c.subnetId, ipAddressId: c.ipId }],
});

const CREATIONS: Creation[] = [
  {
    field: 'createProject',
    query: M.project,
    input: () => ({ name: 'p' }),
    same: () => ({ description: '', name: '  p ' }),
    other: () => ({ name: 'q' }),
  },
  {
    field: 'createNetwork',
    query: M.network,
    input: (c) => ({ projectId: c.projectId, title: 'n' }),
    same: (c) => ({
      zone: 'MSK_AVNTG',
      region: 'MSK',
      defaultFirewallAction: 'ALLOW',
      bandwidthMbps: 100,
      title: 'n ',
      projectId: up(c.projectId),
    }),
    other: (c) => ({ projectId: c.projectId, title: 'n', bandwidthMbps: 200 }),
  },
  {
    field: 'createSubnet',
    query: M.subnet,
    input: (c) => ({ projectId: c.projectId, networkId: c.networkId, title: 's', cidr: '10.20.0.0/24' }),
    same: (c) => ({
      cidr: ' 10.20.0.0/24 ',
      description: '',
      title: 's',
      networkId: up(c.networkId),
      projectId: up(c.projectId),
    }),
    other: (c) => ({ projectId: c.projectId, networkId: c.networkId, title: 's', cidr: '10.21.0.0/24' }),
  },
  {
    field: 'createIpAddress',
    query: M.ip,
    input: (c) => ({ projectId: c.projectId, networkId: c.networkId, title: 'i' }),
    same: (c) => ({ title: 'i', description: '', networkId: up(c.networkId), projectId: c.projectId }),
    other: (c) => ({ projectId: c.projectId, networkId: c.networkId, title: 'j' }),
  },
  {
    field: 'createKafkaCluster',
    query: M.cluster,
    input: (c) => ({ projectId: c.projectId, title: 'k', instanceType: 'C2_MEDIUM', subnetId: c.subnetId }),
    same: (c) => ({
      subnetCidr: '10.10.0.0/24',
      networkId: up(c.networkId),
      subnetId: up(c.subnetId),
      instanceType: 'C2_MEDIUM',
      kafkaVersion: 'V3_1_0',
      instanceCount: 3,
      diskSize: 50,
      title: 'k',
      projectId: c.projectId,
    }),
    other: (c) => ({
      projectId: c.projectId,
      title: 'k',
      instanceType: 'C2_MEDIUM',
      subnetId: c.subnetId,
      instanceCount: 5,
    }),
  },
  {
    field: 'createKafkaTopic',
    query: M.topic,
    input: (c, n) => ({ projectId: c.projectId, clusterId: c.clusterId, name: n, retentionMs: '604800000' }),
    same: (c, n) => ({
      retentionMs: 604800000,
      retentionBytes: -1,
      partitions: 1,
      compressionType: 'producer',
      name: n,
      clusterId: up(c.clusterId),
      projectId: c.projectId,
    }),
    other: (c, n) => ({ projectId: c.projectId, clusterId: c.clusterId, name: n, retentionMs: '1000' }),
  },
  {
    field: 'createKafkaUser',
    query: M.user,
    input: (c, n) => ({ projectId: c.projectId, clusterId: c.clusterId, name: n, password: 'Kafka-pa55!' }),
    same: (c, n) => ({
      acls: [{ operation: 'rw', pattern: '*' }],
      groupAcls: [],
      password: 'Kafka-pa55!',
      name: n,
      clusterId: c.clusterId,
      projectId: up(c.projectId),
    }),
    other: (c, n) => ({ projectId: c.projectId, clusterId: c.clusterId, name: n, password: 'Other-pa55!' }),
  },
  {
    field: 'createVirtualMachine',
    query: M.vm,
    input: (c) => vm(c),
    same: (c) => ({
      networkInterfaces: [{ ipAddressId: up(c.ipId), subnetId: up(c.subnetId), networkId: c.networkId }],
      users: [{ sshKeys: [` ${SSH_KEY}`], name: 'ops' }],
      bootDisk: { image: 'UBUNTU_22_04', sizeGb: 20 },
      promo: false,
      platform: 'COMPUTE_V3',
      instanceType: 'C2_MEDIUM',
      title: 'vm',
      projectId: c.projectId,
    }),
    other: (c) => ({ ...vm(c), instanceType: 'C2_LARGE' }),
  },
];

/** The creation's operation with its input and key as variables, or (`inline`) written into the document. */
function operation(c: Creation, input: Input, key: string, inline = false) {
  if (!inline) return { query: c.query, variables: { input, key } };
  const selection = c.query.slice(c.query.indexOf(') {', c.query.indexOf(c.field)) + 2);
  return {
    query: `mutation { ${c.field}(input: ${graphqlLiteral(input)}, idempotencyKey: ${JSON.stringify(key)}) ${selection}`,
  };
}

const over = (transport: Transport, gw: TestGateway, c: Creation, input: Input, key: string, inline = false) =>
  operationOver(transport, gw, null, operation(c, input, key, inline));

/** The payload of an answer without errors. */
function payload(answer: Answer, c: Creation): Record<string, any> {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>)[c.field];
}

/** The creations the upstream got under the Idempotency-Key of caller key `key` (the open gateway's scope). */
const sentUnder = (gw: TestGateway, key: string) =>
  gw.gateway.sandbox.cloud!.requests.filter(
    (r) => r.method === 'POST' && r.headers['idempotency-key'] === upstreamKey('open', key),
  ).length;

describe.each(MUTATION_SURFACES)(
  'every cloud creation is safe to retry, POST /graphql on $path',
  ({ options, transports }) => {
    let gw: TestGateway;
    let chain: Chain;
    beforeAll(async () => {
      gw = await startTestGateway({}, options);
      chain = await createChain(gw);
    }, 60_000);
    afterAll(() => gw?.close());

    const cases = transports.flatMap((transport) => CREATIONS.map((c) => ({ transport, c, field: c.field })));

    it.each(cases)(
      '$field over $transport: an equal input replays, another is IDEMPOTENCY_KEY_REUSED, one creation',
      async ({ transport, c }) => {
        const key = randomUUID();
        const n = `n-${key.slice(0, 8)}`;
        const first = payload(await over(transport, gw, c, c.input(chain, n), key), c);
        expect(first).toMatchObject({ idempotencyKey: key, replayed: false });
        // The same input again, then written differently: as variables (the key in capitals) and as literals.
        for (const [input, k, inline] of [
          [c.input(chain, n), key, false],
          [c.same(chain, n), up(key), false],
          [c.same(chain, n), up(key), true],
        ] as const) {
          const again = payload(await over(transport, gw, c, input, k, inline), c);
          expect(again, JSON.stringify(input)).toEqual({ ...first, replayed: true });
        }
        for (const inline of [false, true]) {
          const reused = await over(transport, gw, c, c.other(chain, n), key, inline);
          expect(reused.errors?.[0]?.extensions?.code, reused.raw).toBe('IDEMPOTENCY_KEY_REUSED');
        }
        expect(sentUnder(gw, key)).toBe(1);
      },
    );

    it.each(transports.flatMap((first) => ['post', 'ws', 'sse'].map((retry) => ({ first, retry }))))(
      'a creation first over $first replays over $retry',
      async ({ first, retry }) => {
        const c = CREATIONS[1]!;
        const key = randomUUID();
        const made = payload(await over(first, gw, c, c.input(chain, ''), key), c);
        const again = payload(await over(retry as Transport, gw, c, c.same(chain, ''), key, true), c);
        expect(again).toEqual({ ...made, replayed: true });
        expect(sentUnder(gw, key)).toBe(1);
      },
    );
  },
);

describe('GET /graphql refuses a creation', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => gw?.close());

  it('answers 405 and sends nothing upstream', async () => {
    const key = randomUUID();
    const res = await operationOver('get', gw, null, operation(CREATIONS[0]!, { name: 'p' }, key));
    expect(res.status).toBe(405);
    expect(res.data).toBeUndefined();
    expect(sentUnder(gw, key)).toBe(0);
  });
});
