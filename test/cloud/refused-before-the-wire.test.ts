import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, it } from 'vitest';

import { createChain, M, refusedBeforeTheWire, type Chain } from '../helpers/cloud.js';
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
});
