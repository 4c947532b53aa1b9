// A cloud creation the upstream did but whose answer the gateway never read (the socket reset after the work, or an
// answer slower than UPSTREAM_TIMEOUT), with no retry left to the gateway: the app gets UPSTREAM_UNAVAILABLE, and its
// retry with the same key, over another transport, sends the same Idempotency-Key (docs/contract.md, Idempotency), so
// the upstream replays the resource it made instead of making a second one. The next call replays from the gateway.
// Another input with the key in between is IDEMPOTENCY_KEY_REUSED and is never sent under that upstream key.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import { createChain, M, SSH_KEY, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type Answer, type Transport } from '../helpers/operation.js';

interface Creation {
  field: string;
  query: string;
  path: string;
  input: (c: Chain, n: string) => Record<string, unknown>;
}

const PROJECTS = '/apis/projects/public/v4/projects';
const SERVICES = '/ocs/v1/services';

const CREATIONS: Creation[] = [
  { field: 'createProject', query: M.project, path: PROJECTS, input: (_c, n) => ({ name: n }) },
  { field: 'createNetwork', query: M.network, path: SERVICES, input: (c, n) => ({ projectId: c.projectId, title: n }) },
  {
    field: 'createSubnet',
    query: M.subnet,
    path: SERVICES,
    input: (c, n) => ({ projectId: c.projectId, networkId: c.networkId, title: n, cidr: '10.30.0.0/24' }),
  },
  {
    field: 'createIpAddress',
    query: M.ip,
    path: SERVICES,
    input: (c, n) => ({ projectId: c.projectId, networkId: c.networkId, title: n }),
  },
  {
    field: 'createKafkaCluster',
    query: M.cluster,
    path: SERVICES,
    input: (c, n) => ({ projectId: c.projectId, title: n, instanceType: 'C2_MEDIUM', subnetId: c.subnetId }),
  },
  {
    field: 'createKafkaTopic',
    query: M.topic,
    path: SERVICES,
    input: (c, n) => ({ projectId: c.projectId, clusterId: c.clusterId, name: n }),
  },
  {
    field: 'createKafkaUser',
    query: M.user,
    path: SERVICES,
    input: (c, n) => ({ projectId: c.projectId, clusterId: c.clusterId, name: n, password: 'Kafka-pa55!' }),
  },
  {
    field: 'createVirtualMachine',
    query: M.vm,
    path: SERVICES,
    input: (c, n) => ({
      projectId: c.projectId,
      title: n,
      instanceType: 'C2_MEDIUM',
      bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
      users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
      networkInterfaces: [{ networkId: c.networkId, subnetId: c.subnetId, ipAddressId: c.ipId }],
    }),
  },
];

const ORDER: Array<[Transport, Transport, Transport]> = [
  ['post', 'ws', 'sse'],
  ['ws', 'sse-single', 'post'],
];

function payload(answer: Answer, field: string): Record<string, any> {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>)[field];
}

describe('a cloud creation whose answer was lost, retried by the app with the same key', () => {
  type Fault = 'reset-after' | 'slow';
  interface Rig {
    gw: TestGateway;
    chain: Chain;
  }
  /**
   * Per fault: 'slow' needs an attempt timeout shorter than its answer (30 s), and its retry by the app must be answered
   * on that same gateway: 3 s, which a stall of the machine cannot outlast either; 'reset-after' is answered or reset
   * at once, and its gateway's timeout is far longer than a round trip.
   */
  const rigs = {} as Record<Fault, Rig>;
  beforeAll(async () => {
    const start = async (timeout: string): Promise<Rig> => {
      const gw = await startTestGateway({
        UPSTREAM_MAX_RETRIES: '0',
        UPSTREAM_TIMEOUT: timeout,
        UPSTREAM_CIRCUIT_BREAKER: 'off',
      });
      return { gw, chain: await createChain(gw) };
    };
    [rigs.slow, rigs['reset-after']] = await Promise.all([start('3s'), start('60s')]);
  }, 60_000);
  afterAll(() => Promise.all([rigs.slow?.gw.close(), rigs['reset-after']?.gw.close()]));

  const made = (gw: TestGateway) =>
    gw.gateway.sandbox.cloud!.resources().length + gw.gateway.sandbox.cloud!.projects().length;

  it.each(
    CREATIONS.flatMap((c, i) =>
      (['reset-after', 'slow'] as const).map((fault) => ({ c, field: c.field, fault, order: ORDER[i % 2]! })),
    ),
  )(
    '$field, $fault: UPSTREAM_UNAVAILABLE, then created once under the same upstream key',
    async ({ c, fault, order }) => {
      const { gw, chain } = rigs[fault];
      const sandbox = gw.gateway.sandbox.cloud!;
      const key = randomUUID();
      const n = `n-${key.slice(0, 8)}`;
      const send = (t: Transport) =>
        operationOver(t, gw, null, { query: c.query, variables: { input: c.input(chain, n), key } });
      const before = made(gw);
      sandbox.faults.enqueueFor((path, method) => method === 'POST' && path === c.path, fault);
      const failed = await send(order[0]);
      expect(failed.errors?.[0]?.extensions?.code, failed.raw).toBe('UPSTREAM_UNAVAILABLE');
      expect(made(gw) - before, 'the upstream made it').toBe(1);
      const created = payload(await send(order[1]), c.field);
      expect(created).toMatchObject({ idempotencyKey: key, replayed: false });
      expect(made(gw) - before, 'the upstream replayed it').toBe(1);
      expect(payload(await send(order[2]), c.field)).toEqual({ ...created, replayed: true });
      const sent = sandbox.requests.filter(
        (r) => r.method === 'POST' && r.path === c.path && r.headers['idempotency-key'] === upstreamKey('open', key),
      );
      expect(sent).toHaveLength(2);
    },
  );

  it.each([
    { c: CREATIONS[0]!, fault: 'reset-after' as const, order: ORDER[0]! },
    { c: CREATIONS[6]!, fault: 'slow' as const, order: ORDER[1]! },
  ])(
    '$c.field, $fault: after UPSTREAM_UNAVAILABLE another input with the key is IDEMPOTENCY_KEY_REUSED, nothing sent',
    async ({ c, fault, order }) => {
      const { gw, chain } = rigs[fault];
      const sandbox = gw.gateway.sandbox.cloud!;
      const key = randomUUID();
      const n = `n-${key.slice(0, 8)}`;
      const send = (t: Transport, name: string) =>
        operationOver(t, gw, null, { query: c.query, variables: { input: c.input(chain, name), key } });
      const before = made(gw);
      sandbox.faults.enqueueFor((path, method) => method === 'POST' && path === c.path, fault);
      const failed = await send(order[0], n);
      expect(failed.errors?.[0]?.extensions?.code, failed.raw).toBe('UPSTREAM_UNAVAILABLE');
      const sent = sandbox.requests.length;
      const other = await send(order[1], `${n}-other`);
      expect(other.errors?.[0]?.extensions?.code, other.raw).toBe('IDEMPOTENCY_KEY_REUSED');
      expect(sandbox.requests.length, 'nothing sent').toBe(sent);
      const created = payload(await send(order[2], n), c.field);
      expect(created).toMatchObject({ idempotencyKey: key, replayed: false });
      expect(made(gw) - before).toBe(1);
    },
  );
});
