import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, it } from 'vitest';

import { createChain, M, refusedBeforeTheWire, SSH_KEY, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * A provisioning whose input contradicts itself, or leaves out what a reused resource does not tell, is refused whole
 * before its first creation: BAD_USER_INPUT on the composite input's field, no upstream request, nothing stored (no
 * provisioning, no resource, no idempotency record). It used to create the project, network and subnet, then fail
 * at the step that needed the missing or contradicting value.
 */
describe('provisioning: checks that need no upstream id run before the first creation', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway();
    chain = await createChain(gw);
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.gateway.sandbox.cloud!.clearRequests());

  const cluster = { title: 'kafka', instanceType: 'C2_MEDIUM' };

  it('a subnetCidr other than the CIDR of the subnet it creates', async () => {
    await refusedBeforeTheWire(
      gw,
      M.provisionKafka,
      {
        project: { name: 'fresh' },
        network: { title: 'net' },
        subnet: { title: 's', cidr: '10.1.0.0/24' },
        subnetCidr: '10.2.0.0/24',
        cluster,
      },
      'input.subnetCidr',
      'the subnet this provisioning creates has CIDR 10.1.0.0/24 (input.subnet.cidr), not 10.2.0.0/24',
    );
  });

  it('a reused subnet the ledger does not know, without subnetCidr', async () => {
    await refusedBeforeTheWire(
      gw,
      M.provisionKafka,
      { project: { name: 'fresh' }, network: { title: 'net' }, subnetId: randomUUID(), cluster },
      'input.subnetCidr',
      'is required: the gateway did not create this subnet, so it does not know its CIDR',
    );
  });

  for (const publicIp of [null, '203.0.113.7'])
    it(`a reused ipAddressId that names a network, ${publicIp ? 'with' : 'without'} cluster.publicIp`, async () => {
      await refusedBeforeTheWire(
        gw,
        M.provisionKafka,
        {
          projectId: chain.projectId,
          networkId: chain.networkId,
          subnetId: chain.subnetId,
          ipAddressId: chain.networkId,
          cluster: publicIp ? { ...cluster, publicIp } : cluster,
        },
        'input.ipAddressId',
        `${chain.networkId} is a network, not an IP address`,
      );
    });

  it('a reused network of another project than the one it creates', async () => {
    await refusedBeforeTheWire(
      gw,
      M.provisionKafka,
      { project: { name: 'fresh' }, networkId: chain.networkId, subnet: { title: 's', cidr: '10.3.0.0/24' }, cluster },
      'input.networkId',
      `${chain.networkId} belongs to project ${chain.projectId}, not the project this provisioning creates`,
    );
  });

  it('a reused subnet of another network than the one it creates', async () => {
    await refusedBeforeTheWire(
      gw,
      M.provisionKafka,
      { projectId: chain.projectId, network: { title: 'net' }, subnetId: chain.subnetId, cluster },
      'input.networkId',
      `subnet ${chain.subnetId} belongs to network ${chain.networkId}, not the network this provisioning creates`,
    );
  });

  // The cluster's white_host would be the address of an IP address in another network, which reaches none of its hosts.
  for (const publicIp of [null, '203.0.113.8'])
    it(`provisionKafkaCluster: a reused IP address of another network, ${publicIp ? 'with' : 'without'} cluster.publicIp`, async () => {
      await refusedBeforeTheWire(
        gw,
        M.provisionKafka,
        {
          projectId: chain.projectId,
          network: { title: 'net' },
          subnet: { title: 's', cidr: '10.5.0.0/24' },
          ipAddressId: chain.ipId,
          cluster: publicIp ? { ...cluster, publicIp } : cluster,
        },
        'input.ipAddressId',
        `IP address ${chain.ipId} belongs to network ${chain.networkId}, not the network this provisioning creates`,
      );
      const other = randomUUID();
      await refusedBeforeTheWire(
        gw,
        M.provisionKafka,
        {
          projectId: chain.projectId,
          networkId: other,
          subnetId: randomUUID(),
          subnetCidr: '10.6.0.0/24',
          ipAddressId: chain.ipId,
          cluster: publicIp ? { ...cluster, publicIp } : cluster,
        },
        'input.ipAddressId',
        `IP address ${chain.ipId} belongs to network ${chain.networkId}, not ${other}`,
      );
    });

  it('provisionVirtualMachine: a reused IP address of another network than the one it creates', async () => {
    await refusedBeforeTheWire(
      gw,
      M.provisionVm,
      {
        projectId: chain.projectId,
        network: { title: 'net' },
        subnet: { title: 's', cidr: '10.4.0.0/24' },
        ipAddressId: chain.ipId,
        virtualMachine: {
          title: 'vm',
          instanceType: 'C2_SMALL',
          bootDisk: { sizeGb: 10, image: 'DEBIAN_11' },
          users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
        },
      },
      'input.ipAddressId',
      `IP address ${chain.ipId} belongs to network ${chain.networkId}, not the network this provisioning creates`,
    );
  });
});
