import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createChain, M, ok, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const TREE = `query($id: ID!) {
  project(id: $id) {
    id name
    networks { id title subnets { id cidr } ipAddresses { id address } }
    kafkaClusters { id title subnetCidr network { id } topics { id name } users { id name acls { operation } } }
    virtualMachines { id title bootDisk { image iops } users { name hasPassword } networkInterfaces { network { id } subnet { id } ipAddress { id } } }
  }
}`;

describe('the ledger answers queries about what the gateway created', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway();
    chain = await createChain(gw);
  });
  afterAll(() => gw.close());

  it('project(id) shows the whole tree', async () => {
    const res = await gw.graphql(TREE, { id: chain.projectId });
    expect(res.errors).toBeUndefined();
    const p = res.data!.project;
    expect(p.networks).toEqual([
      {
        id: chain.networkId,
        title: 'net-1',
        subnets: [{ id: chain.subnetId, cidr: '10.10.0.0/24' }],
        ipAddresses: [{ id: chain.ipId, address: expect.stringMatching(/^\d+\.\d+\.\d+\.\d+$/) }],
      },
    ]);
    expect(p.kafkaClusters).toEqual([
      {
        id: chain.clusterId,
        title: 'kafka-1',
        subnetCidr: '10.10.0.0/24',
        network: { id: chain.networkId },
        topics: [{ id: chain.topicId, name: 'events' }],
        users: [{ id: chain.userId, name: 'app', acls: [{ operation: 'rw' }] }],
      },
    ]);
    expect(p.virtualMachines).toEqual([
      {
        id: chain.vmId,
        title: 'vm-1',
        bootDisk: { image: 'UBUNTU_22_04', iops: 200 },
        users: [{ name: 'ops', hasPassword: true }],
        networkInterfaces: [
          { network: { id: chain.networkId }, subnet: { id: chain.subnetId }, ipAddress: { id: chain.ipId } },
        ],
      },
    ]);
  });

  it('node(id) finds any created resource with its type', async () => {
    const res = await gw.graphql(
      `query($a: ID!, $b: ID!) { a: node(id: $a) { __typename id } b: node(id: $b) { __typename ... on KafkaTopic { name } } c: node(id: "unknown") { id } }`,
      {
        a: chain.vmId,
        b: chain.topicId,
      },
    );
    expect(res.data).toEqual({
      a: { __typename: 'VirtualMachine', id: chain.vmId },
      b: { __typename: 'KafkaTopic', name: 'events' },
      c: null,
    });
  });

  it('projects lists the projects newest first', async () => {
    await ok(gw, M.project, { input: { name: 'newer' } });
    const res = await gw.graphql('{ projects { name } }');
    expect(res.data!.projects.map((p: { name: string }) => p.name)).toEqual(['newer', 'chain']);
  });

  it('loads nested lists through DataLoader: one SQL statement per level, not one per row', async () => {
    // Five more networks with two subnets each: per-row loading would cost 5+ statements at the subnet level.
    for (let n = 0; n < 5; n++) {
      const networkId = (await ok(gw, M.network, { input: { projectId: chain.projectId, title: `n${n}` } })).network.id;
      for (let s = 0; s < 2; s++)
        await ok(gw, M.subnet, {
          input: { projectId: chain.projectId, networkId, title: `s${s}`, cidr: `10.${n + 20}.${s}.0/24` },
        });
    }
    const q = `query($id: ID!) { project(id: $id) { networks { subnets { id } ipAddresses { id } } } }`;
    const stats = gw.gateway.services.store.stats;
    const statements = async () => {
      const before = stats.queries;
      const res = await gw.graphql(q, { id: chain.projectId });
      expect(res.data!.project.networks).toHaveLength(6);
      return stats.queries - before;
    };
    // Each level reads its rows' ids, then the records not yet in memory (docs/decisions/070): two statements at most.
    expect(await statements()).toBeLessThanOrEqual(2 * 4);
    // Again, every record is in memory: the project's needs no statement, each level below it one (the switch off:
    // test/cloud/ledger-cache.test.ts).
    expect(await statements()).toBe(3);
  });
});
