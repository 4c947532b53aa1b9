import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { createChain, M, ok, refusedBeforeTheWire, SSH_KEY, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * Inputs the spec does not forbid in so many words but that can never be right (Kafka refuses them, or the field
 * cannot mean them): refused with BAD_USER_INPUT on the field, nothing sent upstream, nothing stored. Each used to be
 * sent. Their neighbours that may be right are still sent.
 */
describe('inputs that can never be right are refused before the wire', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway();
    chain = await createChain(gw);
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.gateway.sandbox.cloud!.clearRequests());

  const topic = (over: Record<string, unknown>) => ({
    projectId: chain.projectId,
    clusterId: chain.clusterId,
    name: 't',
    ...over,
  });

  it('a topic whose min compaction lag exceeds its max compaction lag (Kafka refuses it)', async () => {
    await refusedBeforeTheWire(
      gw,
      M.topic,
      topic({ minCompactionLagMs: '7200000', maxCompactionLagMs: 3600000 }),
      'input.minCompactionLagMs',
      'must not exceed maxCompactionLagMs (3600000), got 7200000',
    );
    // Compared as numbers, not as text ("900" > "1000" as text).
    await refusedBeforeTheWire(
      gw,
      M.topic,
      topic({ minCompactionLagMs: '10000000000000000000', maxCompactionLagMs: '9000000000000000000' }),
      'input.minCompactionLagMs',
      'must be at most 9223372036854775807 (a 64-bit whole number), got 10000000000000000000',
    );
    // And so is a topic of a composite provisioning, before its first creation.
    await refusedBeforeTheWire(
      gw,
      M.provisionKafka,
      {
        projectId: chain.projectId,
        networkId: chain.networkId,
        subnetId: chain.subnetId,
        cluster: { title: 'k', instanceType: 'C2_SMALL' },
        topics: [{ name: 'lag', minCompactionLagMs: 2, maxCompactionLagMs: 1 }],
      },
      'input.topics[0].minCompactionLagMs',
      'must not exceed maxCompactionLagMs (1), got 2',
    );
    await ok(gw, M.topic, { input: topic({ name: 'equal-lags', minCompactionLagMs: 900, maxCompactionLagMs: 900 }) });
    await ok(gw, M.topic, { input: topic({ name: 'lags', minCompactionLagMs: '900', maxCompactionLagMs: '1000' }) });
  });

  it('a topic whose max compaction lag is 0 (Kafka: at least 1)', async () => {
    await refusedBeforeTheWire(
      gw,
      M.topic,
      topic({ maxCompactionLagMs: '0' }),
      'input.maxCompactionLagMs',
      'must be at least 1 (Kafka), got 0',
    );
  });

  it('a replication factor beyond the 16 bits Kafka carries it in, for a cluster the ledger does not know', async () => {
    const clusterId = '0d1f6a52-3d55-4c0e-9a51-8c0f5e4f7f11';
    await refusedBeforeTheWire(
      gw,
      M.topic,
      topic({ clusterId, replicationFactor: 32768, minInsyncReplicas: 1 }),
      'input.replicationFactor',
      "must be at most 32767 (Kafka's 16-bit replication factor), got 32768",
    );
  });

  it('a Kafka user whose password is only blanks; a password with blanks around it is sent as given', async () => {
    for (const password of [' ', '   ', '\t \n']) {
      await refusedBeforeTheWire(
        gw,
        M.user,
        { projectId: chain.projectId, clusterId: chain.clusterId, name: 'u', password },
        'input.password',
        'must not be only blanks',
      );
    }
    await ok(gw, M.user, {
      input: { projectId: chain.projectId, clusterId: chain.clusterId, name: 'spaced', password: ' pass word ' },
    });
    const sent = gw.gateway.sandbox.cloud!.requests.at(-1)!.body as Record<string, any>;
    expect(sent.spec['vendor.extensions.user'].password).toBe(' pass word ');
  });

  it('a subnet CIDR that reaches into addresses no host can hold, 0.0.0.0/0 first', async () => {
    const cases: Array<[string, string]> = [
      ['0.0.0.0/0', '0.0.0.0/8 ("this network")'],
      ['0.0.0.0/8', '0.0.0.0/8 ("this network")'],
      ['126.0.0.0/7', '127.0.0.0/8 (loopback)'],
      ['127.0.0.0/24', '127.0.0.0/8 (loopback)'],
      ['224.0.0.0/24', '224.0.0.0/4 (multicast)'],
      ['255.255.255.255/32', '240.0.0.0/4 (reserved, with the broadcast address)'],
    ];
    for (const [cidr, block] of cases) {
      const message = `${cidr} is not a subnet: it overlaps ${block}, whose addresses no host can hold; give the subnet's own block`;
      await refusedBeforeTheWire(
        gw,
        M.subnet,
        { projectId: chain.projectId, networkId: chain.networkId, title: 's', cidr },
        'input.cidr',
        message,
      );
      await refusedBeforeTheWire(
        gw,
        M.cluster,
        {
          projectId: chain.projectId,
          title: 'k',
          instanceType: 'C2_SMALL',
          networkId: chain.networkId,
          subnetId: '5b0c7a1e-8f43-4f0e-9d7e-2a6b9c1d3e40',
          subnetCidr: cidr,
        },
        'input.subnetCidr',
        message,
      );
    }
    // A composite provisioning runs the same checks on its steps, before its first creation.
    await refusedBeforeTheWire(
      gw,
      M.provisionKafka,
      {
        projectId: chain.projectId,
        networkId: chain.networkId,
        subnet: { title: 's', cidr: '0.0.0.0/0' },
        cluster: { title: 'k', instanceType: 'C2_SMALL' },
        topics: [{ name: 'lag', minCompactionLagMs: 2, maxCompactionLagMs: 1 }],
      },
      'input.subnet.cidr',
      `0.0.0.0/0 is not a subnet: it overlaps 0.0.0.0/8 ("this network"), whose addresses no host can hold; give the subnet's own block`,
    );
    // Private and public blocks next to them are subnets.
    for (const cidr of ['1.0.0.0/8', '128.0.0.0/3', '203.0.113.0/24', '192.168.0.0/16'])
      await ok(gw, M.subnet, { input: { projectId: chain.projectId, networkId: chain.networkId, title: cidr, cidr } });
  });

  it('a VM with one IP address on two interfaces; two interfaces on one subnet are the upstream’s to judge', async () => {
    const nic = { networkId: chain.networkId, subnetId: chain.subnetId, ipAddressId: chain.ipId };
    const vm = (networkInterfaces: unknown[]) => ({
      projectId: chain.projectId,
      title: 'vm',
      instanceType: 'C2_SMALL',
      bootDisk: { sizeGb: 10, image: 'DEBIAN_11' },
      users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
      networkInterfaces,
    });
    await refusedBeforeTheWire(
      gw,
      M.vm,
      vm([nic, { ...nic, ipAddressId: chain.ipId.toUpperCase() }]),
      'input.networkInterfaces[1].ipAddressId',
      `${chain.ipId} is also the IP address of the interface at index 0; each interface needs its own`,
    );
    const otherIp = (
      await ok(gw, M.ip, { input: { projectId: chain.projectId, networkId: chain.networkId, title: 'ip-2' } })
    ).ipAddress.id;
    await ok(gw, M.vm, { input: vm([nic, { ...nic, ipAddressId: otherIp }]) });
  });
});
