import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { SANDBOX_SERVICE_ACCOUNT_TOKEN } from '../../src/sandbox/index.js';
import { createChain, M, ok, refusedBeforeTheWire, SSH_KEY, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * Inputs the upstream refuses are refused by the gateway first, with BAD_USER_INPUT on the field, nothing sent
 * upstream and nothing stored. Each used to reach the upstream and come back UPSTREAM_REJECTED.
 */
describe('single creations: refused before the wire', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway();
    chain = await createChain(gw);
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.gateway.sandbox.cloud!.clearRequests());

  it('a CIDR prefix written with a leading zero, as a leading zero in an octet is', async () => {
    for (const cidr of ['10.0.0.0/08', '10.0.0.0/024', '0.0.0.0/00']) {
      await refusedBeforeTheWire(
        gw,
        M.subnet,
        { projectId: chain.projectId, networkId: chain.networkId, title: 's', cidr },
        'input.cidr',
        `must be an IPv4 CIDR block a.b.c.d/n, got ${JSON.stringify(cidr)}`,
      );
    }
    await refusedBeforeTheWire(
      gw,
      M.cluster,
      {
        projectId: chain.projectId,
        title: 'k',
        instanceType: 'C2_SMALL',
        networkId: chain.networkId,
        subnetId: randomUUID(),
        subnetCidr: '10.20.0.0/016',
      },
      'input.subnetCidr',
      'must be an IPv4 CIDR block a.b.c.d/n, got "10.20.0.0/016"',
    );
  });

  it('createKafkaCluster with a publicIp that is not a public address (spec: white_host is a public IPv4)', async () => {
    for (const publicIp of ['0.0.0.0', '10.1.2.3', '100.64.0.1', '127.0.0.1', '169.254.1.1', '172.16.0.1']) {
      await refusedBeforeTheWire(
        gw,
        M.cluster,
        { projectId: chain.projectId, title: 'k', instanceType: 'C2_SMALL', subnetId: chain.subnetId, publicIp },
        'input.publicIp',
        `must be a public IPv4 address; ${publicIp} is in a private or reserved range`,
      );
    }
    for (const publicIp of ['192.168.0.1', '198.18.0.1', '224.0.0.1', '240.0.0.1', '255.255.255.255']) {
      await refusedBeforeTheWire(
        gw,
        M.cluster,
        { projectId: chain.projectId, title: 'k', instanceType: 'C2_SMALL', subnetId: chain.subnetId, publicIp },
        'input.publicIp',
        `must be a public IPv4 address; ${publicIp} is in a private or reserved range`,
      );
    }
  });

  it('createKafkaCluster with a network the ledger knows in another project', async () => {
    const other = (await gw.graphql(M.project, { input: { name: 'other' } })).data!.createProject.project.id;
    gw.gateway.sandbox.cloud!.clearRequests();
    await refusedBeforeTheWire(
      gw,
      M.cluster,
      {
        projectId: other,
        title: 'k',
        instanceType: 'C2_SMALL',
        networkId: chain.networkId,
        subnetId: randomUUID(),
        subnetCidr: '10.0.0.0/24',
      },
      'input.networkId',
      `${chain.networkId} belongs to project ${chain.projectId}, not ${other}`,
    );
  });

  it('createVirtualMachine with a subnet and an IP address the ledger knows in another project, their network made outside the gateway', async () => {
    const other = (await ok(gw, M.project, { input: { name: 'other' } })).project.id;
    // A network made straight at the cloud API: the ledger does not know it, so it cannot tell its project.
    const made = await fetch(`${gw.gateway.sandbox.cloud!.url}/ocs/v1/services`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${SANDBOX_SERVICE_ACCOUNT_TOKEN}`,
        'content-type': 'application/json',
        'idempotency-key': randomUUID(),
      },
      body: JSON.stringify({
        platform: { productCode: 'network', regionCode: 'msk' },
        kind: 'network',
        metadata: { title: 'outside', description: '' },
        projectId: other,
        spec: { 'vendor.extensions.network': { bandwidth_mbps: 100, default_gfw_rule_action: 'allow' } },
        zoneCode: 'msk-avntg',
      }),
    });
    expect(made.status).toBeLessThan(300);
    const networkId = ((await made.json()) as { id: string }).id;
    const subnetId = (
      await ok(gw, M.subnet, { input: { projectId: other, networkId, title: 's', cidr: '10.9.0.0/24' } })
    ).subnet.id;
    const ipId = (await ok(gw, M.ip, { input: { projectId: other, networkId, title: 'i' } })).ipAddress.id;
    gw.gateway.sandbox.cloud!.clearRequests();
    const vm = (nic: Record<string, string>) => ({
      projectId: chain.projectId,
      title: 'vm',
      instanceType: 'C2_SMALL',
      bootDisk: { sizeGb: 10, image: 'DEBIAN_11' },
      users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
      networkInterfaces: [nic],
    });
    await refusedBeforeTheWire(
      gw,
      M.vm,
      vm({ networkId, subnetId, ipAddressId: ipId }),
      'input.networkInterfaces[0].subnetId',
      `${subnetId} belongs to project ${other}, not ${chain.projectId}`,
    );
    await refusedBeforeTheWire(
      gw,
      M.vm,
      vm({ networkId, subnetId: randomUUID(), ipAddressId: ipId }),
      'input.networkInterfaces[0].ipAddressId',
      `${ipId} belongs to project ${other}, not ${chain.projectId}`,
    );
  });
});
