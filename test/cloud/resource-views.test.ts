import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createChain, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/** Every field of every cloud type, relations one level deep. */
const FIELDS = {
  Project: 'id name description createdAt raw networks { id } kafkaClusters { id } virtualMachines { id }',
  Network:
    'id project { id } title description bandwidthMbps defaultFirewallAction region zone subnets { id } ipAddresses { id } createdAt raw',
  Subnet: 'id network { id } networkId title description cidr createdAt raw',
  IpAddress: 'id network { id } networkId title description address createdAt raw',
  KafkaCluster:
    'id project { id } title description instanceCount cpuUtilization diskSize diskType instanceType kafkaVersion networkId network { id } subnetId subnet { id } subnetCidr publicIp region zone topics { id } users { id } createdAt raw',
  KafkaTopic:
    'id cluster { id } clusterId name partitions replicationFactor compressionType maxMessageBytes minInsyncReplicas cleanupPolicy minCompactionLagMs maxCompactionLagMs deleteRetentionMs retentionBytes retentionMs createdAt raw',
  KafkaUser:
    'id cluster { id } clusterId name acls { pattern patternType operation } groupAcls { pattern patternType } createdAt raw',
  VirtualMachine:
    'id project { id } title description platform instanceType bootDisk { sizeGb diskType image imageId iops } users { name sshKeys hasPassword } networkInterfaces { networkId network { id } subnetId subnet { id } ipAddressId ipAddress { id } } promo region zone createdAt raw',
};

const node = (type: keyof typeof FIELDS) =>
  `query($id: ID!) { node(id: $id) { __typename ... on ${type} { ${FIELDS[type]} } } }`;

const TREE = `query($id: ID!) {
  project(id: $id) {
    ${FIELDS.Project}
    networks { ${FIELDS.Network} subnets { ${FIELDS.Subnet} } ipAddresses { ${FIELDS.IpAddress} } }
    kafkaClusters { ${FIELDS.KafkaCluster} topics { ${FIELDS.KafkaTopic} } users { ${FIELDS.KafkaUser} } }
    virtualMachines { ${FIELDS.VirtualMachine} }
  }
  projects(first: 5) { ${FIELDS.Project} }
}`;

describe('a cloud resource reads the same wherever it enters a query (its typed view, docs/decisions/027)', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway({ GRAPHQL_MAX_COST: '100000' });
    chain = await createChain(gw);
  });
  afterAll(() => gw.close());

  it('node(id), project(id) and projects answer every field of every kind alike', async () => {
    const tree = await gw.graphql(TREE, { id: chain.projectId });
    expect(tree.errors).toBeUndefined();
    const p = tree.data!.project;
    const byId = async (id: string, type: keyof typeof FIELDS) => {
      const res = await gw.graphql(node(type), { id });
      expect(res.errors).toBeUndefined();
      const { __typename, ...fields } = res.data!.node;
      return { __typename, fields };
    };

    const network = p.networks[0];
    const subnet = network.subnets[0];
    const ip = network.ipAddresses[0];
    const cluster = p.kafkaClusters[0];
    const topic = cluster.topics[0];
    const user = cluster.users[0];
    const vm = p.virtualMachines[0];

    const cases: [string, keyof typeof FIELDS, Record<string, unknown>][] = [
      [chain.projectId, 'Project', p],
      [chain.networkId, 'Network', network],
      [chain.subnetId, 'Subnet', subnet],
      [chain.ipId, 'IpAddress', ip],
      [chain.clusterId, 'KafkaCluster', cluster],
      [chain.topicId, 'KafkaTopic', topic],
      [chain.userId, 'KafkaUser', user],
      [chain.vmId, 'VirtualMachine', vm],
    ];
    for (const [id, type, fromTree] of cases) {
      const { __typename, fields } = await byId(id, type);
      expect(__typename).toBe(type);
      // The tree asked for more of the related objects; the fields asked for in both are equal.
      expect(fromTree).toMatchObject(fields);
    }
    expect(tree.data!.projects).toContainEqual(
      expect.objectContaining({ id: p.id, name: 'chain', description: 'test chain', raw: p.raw }),
    );

    // The values themselves: the stored specs, the catalog's answers and the upstream's responses.
    expect(network).toMatchObject({
      project: { id: chain.projectId },
      title: 'net-1',
      description: '',
      bandwidthMbps: 200,
      defaultFirewallAction: 'ALLOW',
      region: 'MSK',
      zone: 'MSK_AVNTG',
    });
    expect(subnet).toMatchObject({
      network: { id: chain.networkId },
      networkId: chain.networkId,
      title: 'subnet-1',
      cidr: '10.10.0.0/24',
    });
    expect(ip).toMatchObject({
      networkId: chain.networkId,
      title: 'ip-1',
      description: '',
      address: expect.stringMatching(/^\d+\.\d+\.\d+\.\d+$/),
    });
    expect(cluster).toMatchObject({
      instanceType: 'C2_MEDIUM',
      subnetId: chain.subnetId,
      subnet: { id: chain.subnetId },
      publicIp: '203.0.113.10',
      instanceCount: 3,
    });
    expect(topic).toMatchObject({
      cluster: { id: chain.clusterId },
      clusterId: chain.clusterId,
      name: 'events',
      partitions: 3,
      replicationFactor: 3,
      minInsyncReplicas: 2,
      retentionBytes: '-1',
    });
    expect(user).toMatchObject({
      clusterId: chain.clusterId,
      name: 'app',
      acls: [{ pattern: '*', patternType: 'literal', operation: 'rw' }],
      groupAcls: [],
    });
    expect(vm).toMatchObject({
      bootDisk: { sizeGb: 20, diskType: 'SSD_BASIC', image: 'UBUNTU_22_04', iops: 200 },
      users: [{ name: 'ops', hasPassword: true }],
      networkInterfaces: [
        {
          networkId: chain.networkId,
          subnetId: chain.subnetId,
          ipAddressId: chain.ipId,
          ipAddress: { id: chain.ipId },
        },
      ],
      promo: false,
    });
    for (const r of [p, network, subnet, ip, cluster, topic, user, vm]) {
      expect(r.raw).toEqual(expect.anything());
      expect(Date.parse(r.createdAt)).not.toBeNaN();
    }
    expect(JSON.stringify(user.raw)).not.toContain('S3cret-kafka-pass!');
    expect(JSON.stringify(vm.raw)).not.toContain('Vm-pa55word!');
  });
});
