// provisionKafkaCluster's idempotency on every transport that runs a mutation (POST /graphql on the direct path and on
// Apollo's, graphql-ws, SSE in both modes): a retry with the same key and an equal input written differently (fields
// in another order, defaults given, text the gateway trims before it goes upstream, literals instead of variables)
// replays the provisioning; another input is IDEMPOTENCY_KEY_REUSED; and a provisioning that failed and is resumed over
// another transport creates nothing twice.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createChain, SSH_KEY, upstreamCreations } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { graphqlLiteral, MUTATION_SURFACES, operationOver, type Answer, type Transport } from '../helpers/operation.js';

const SELECTION = '{ provisioning { id } idempotencyKey replayed }';
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) ${SELECTION}
}`;

/** The first call's input (its topic's name makes it unique), one equal to it written differently, and another. */
const input = (n: string) => ({
  project: { name: 'p' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.62.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
  topics: [{ name: n }],
});
const same = (n: string) => ({
  zone: 'MSK_AVNTG',
  region: 'MSK',
  users: [],
  topics: [{ partitions: 1, name: ` ${n} ` }],
  cluster: { instanceCount: 3, instanceType: 'C2_MEDIUM', title: ' k' },
  subnet: { description: '', cidr: '10.62.0.0/24 ', title: 'sub' },
  network: { bandwidthMbps: 100, title: 'net ' },
  project: { description: '', name: '  p' },
});
const other = (n: string) => ({ ...input(n), topics: [{ name: n, partitions: 2 }] });

const provision = (transport: Transport, gw: TestGateway, given: object, key: string, inline = false) =>
  operationOver(
    transport,
    gw,
    null,
    inline
      ? {
          query: `mutation { provisionKafkaCluster(input: ${graphqlLiteral(given)}, idempotencyKey: "${key}") ${SELECTION} }`,
        }
      : { query: PROVISION, variables: { input: given, key } },
  );

function payload(answer: Answer): { provisioning: { id: string }; idempotencyKey: string; replayed: boolean } {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>).provisionKafkaCluster;
}

/** Creations of the project, network, subnet, cluster and the topic: one of each. */
const STEPS = 5;

describe.each(MUTATION_SURFACES)(
  'provisionKafkaCluster is safe to retry, POST /graphql on $path',
  ({ options, transports }) => {
    let gw: TestGateway;
    beforeAll(async () => {
      gw = await startTestGateway({ UPSTREAM_MAX_RETRIES: '0' }, options);
    });
    afterAll(() => gw?.close());

    it.each(transports)(
      'over %s: an equal input replays, another is IDEMPOTENCY_KEY_REUSED, each step created once',
      async (transport) => {
        const key = randomUUID();
        const n = `t-${key.slice(0, 8)}`;
        const before = upstreamCreations(gw).length;
        const first = payload(await provision(transport, gw, input(n), key));
        expect(first.replayed).toBe(false);
        await gw.gateway.services.provisioning.idle();
        for (const [given, inline] of [
          [input(n), false],
          [same(n), false],
          [same(n), true],
        ] as const) {
          const again = payload(await provision(transport, gw, given, key, inline));
          expect(again, JSON.stringify(given)).toEqual({ ...first, replayed: true });
        }
        for (const inline of [false, true]) {
          const reused = await provision(transport, gw, other(n), key, inline);
          expect(reused.errors?.[0]?.extensions?.code, reused.raw).toBe('IDEMPOTENCY_KEY_REUSED');
        }
        await gw.gateway.services.provisioning.idle();
        expect(upstreamCreations(gw).length - before).toBe(STEPS);
      },
    );
  },
);

describe('a failed provisionKafkaCluster resumed over another transport', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ UPSTREAM_MAX_RETRIES: '0' });
  });
  afterAll(() => gw?.close());

  it.each([
    { first: 'ws', retry: 'post' },
    { first: 'sse', retry: 'ws' },
    { first: 'post', retry: 'sse-single' },
  ] as Array<{ first: Transport; retry: Transport }>)(
    'first over $first, resumed over $retry: created once',
    async ({ first, retry }) => {
      const sandbox = gw.gateway.sandbox.cloud!;
      const key = randomUUID();
      const n = `t-${key.slice(0, 8)}`;
      const before = upstreamCreations(gw).length;
      const made = sandbox.resources().length;
      // The topic step (after the network, the subnet and the cluster) fails once.
      sandbox.faults.enqueueFor(
        (path, method) => method === 'POST' && path === '/ocs/v1/services' && sandbox.resources().length === made + 3,
        '503',
      );
      const failed = payload(await provision(first, gw, input(n), key));
      await gw.gateway.services.provisioning.idle();
      // Resumed with the topic's name written with spaces around it: the same topic, so the same step key.
      const resumed = payload(await provision(retry, gw, same(n), key, true));
      expect(resumed).toEqual({ ...failed, replayed: false });
      await gw.gateway.services.provisioning.idle();
      const status = await gw.graphql(`query($id: ID!) { provisioning(id: $id) { state } }`, {
        id: failed.provisioning.id,
      });
      expect(status.data!.provisioning.state).toBe('SUCCEEDED');
      const sent = upstreamCreations(gw).slice(before);
      expect(sent.map((r) => r.status)).toEqual([201, 201, 201, 201, 503, 201]);
      expect(sent[5]!.headers['idempotency-key']).toBe(sent[4]!.headers['idempotency-key']);
    },
  );
});

describe('provisionKafkaCluster retried with what the gateway knows given or left out', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => gw?.close());

  it.each(['post', 'ws'] as Transport[])(
    'over %s: the CIDR of a reused subnet the ledger knows, a null for an omitted field, replay; another cluster is REUSED',
    async (transport) => {
      const c = await createChain(gw);
      const key = randomUUID();
      const n = `t-${key.slice(0, 8)}`;
      const reusing = (more: object) => ({
        projectId: c.projectId,
        networkId: c.networkId,
        subnetId: c.subnetId,
        cluster: { title: 'reusing', instanceType: 'C2_MEDIUM' },
        topics: [{ name: n }],
        ...more,
      });
      const before = upstreamCreations(gw).length;
      const first = payload(await provision(transport, gw, reusing({}), key));
      await gw.gateway.services.provisioning.idle();
      for (const [given, inline] of [
        [reusing({ subnetCidr: '10.10.0.0/24' }), false],
        [reusing({ ipAddress: null, subnetCidr: ' 10.10.0.0/24' }), true],
      ] as const) {
        const again = payload(await provision(transport, gw, given, key, inline));
        expect(again, JSON.stringify(given)).toEqual({ ...first, replayed: true });
      }
      const other = reusing({ cluster: { title: 'other', instanceType: 'C2_MEDIUM' } });
      const reused = await provision(transport, gw, other, key);
      expect(reused.errors?.[0]?.extensions?.code, reused.raw).toBe('IDEMPOTENCY_KEY_REUSED');
      await gw.gateway.services.provisioning.idle();
      // The cluster and its topic.
      expect(upstreamCreations(gw).length - before).toBe(2);
    },
  );
});

describe('provisionVirtualMachine retried with an equal input written differently', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => gw?.close());

  const VM = `mutation($input: ProvisionVirtualMachineInput!, $key: UUID) {
    provisionVirtualMachine(input: $input, idempotencyKey: $key) ${SELECTION}
  }`;
  const vm = (more: object = {}) => ({
    project: { name: 'vm-project' },
    network: { title: 'n' },
    subnet: { title: 's', cidr: '192.168.20.0/24' },
    ipAddress: { title: 'ip' },
    virtualMachine: {
      title: 'vm',
      instanceType: 'C4_LARGE',
      bootDisk: { sizeGb: 30, image: 'ROCKY_LINUX_9' },
      users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
      ...more,
    },
  });

  it('replays spaces the steps trim and defaults given; another VM is IDEMPOTENCY_KEY_REUSED', async () => {
    const key = randomUUID();
    const before = upstreamCreations(gw).length;
    const send = (input: object) => operationOver('post', gw, null, { query: VM, variables: { input, key } });
    const first = (await send(vm())).data as Record<string, any>;
    expect(first.provisionVirtualMachine.replayed).toBe(false);
    await gw.gateway.services.provisioning.idle();
    const same = vm({ users: [{ sshKeys: [`${SSH_KEY} `], name: ' ops' }], platform: 'COMPUTE_V3', title: 'vm ' });
    const again = (await send(same)).data as Record<string, any>;
    expect(again).toEqual({ provisionVirtualMachine: { ...first.provisionVirtualMachine, replayed: true } });
    const reused = await send(vm({ instanceType: 'C4_MEDIUM' }));
    expect(reused.errors?.[0]?.extensions?.code, reused.raw).toBe('IDEMPOTENCY_KEY_REUSED');
    await gw.gateway.services.provisioning.idle();
    // The project, the network, the subnet, the IP address and the VM.
    expect(upstreamCreations(gw).length - before).toBe(5);
  });
});
