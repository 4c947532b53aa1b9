import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { createChain, M, SSH_KEY, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('validation before the wire: bad input is refused with BAD_USER_INPUT naming the field, and nothing is sent upstream', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway();
    chain = await createChain(gw);
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.gateway.sandbox.cloud!.clearRequests());

  async function refused(query: string, input: Record<string, unknown>, field: string, code = 'BAD_USER_INPUT') {
    const res = await gw.graphql(query, { input, key: randomUUID() });
    expect(res.errors, JSON.stringify(res.data)).toBeDefined();
    expect(res.errors![0]!.extensions!.code).toBe(code);
    if (code === 'BAD_USER_INPUT' && field)
      expect(res.errors![0]!.extensions!.field ?? res.errors![0]!.message).toContain(field);
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
    return res.errors![0]!;
  }

  const vm = (over: Record<string, unknown> = {}) => ({
    projectId: chain.projectId,
    title: 'vm',
    instanceType: 'C2_SMALL',
    bootDisk: { sizeGb: 10, image: 'DEBIAN_11' },
    users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
    networkInterfaces: [{ networkId: chain.networkId, subnetId: chain.subnetId, ipAddressId: chain.ipId }],
    ...over,
  });

  it('refuses a malformed CIDR, one with host bits, and a prefix over 32', async () => {
    for (const cidr of ['10.0.0.0', '10.0.0.256/24', '10.0.0.1/24', '10.0.0.0/33', '010.0.0.0/8', 'not-a-cidr']) {
      await refused(
        M.subnet,
        { projectId: chain.projectId, networkId: chain.networkId, title: 's', cidr },
        'input.cidr',
      );
    }
  });

  it('refuses a publicIp that is not an IPv4 address', async () => {
    for (const publicIp of ['300.1.1.1', '1.2.3', '::1', '1.2.3.4/32']) {
      await refused(
        M.cluster,
        { projectId: chain.projectId, title: 'k', instanceType: 'C2_SMALL', subnetId: chain.subnetId, publicIp },
        'input.publicIp',
      );
    }
  });

  it('refuses an instance type that the platform does not offer (GPU types only on COMPUTE_GPU_V1)', async () => {
    const e1 = await refused(M.vm, vm({ platform: 'COMPUTE_V3', instanceType: 'C32_G1_LARGE' }), 'input.instanceType');
    expect(e1.message).toContain('COMPUTE_GPU_V1');
    await refused(M.vm, vm({ platform: 'COMPUTE_GPU_V1', instanceType: 'C2_SMALL' }), 'input.instanceType');
  });

  it('refuses an SSD_ULTRA_PLUS boot disk', async () => {
    await refused(
      M.vm,
      vm({ bootDisk: { sizeGb: 10, diskType: 'SSD_ULTRA_PLUS', image: 'DEBIAN_11' } }),
      'input.bootDisk.diskType',
    );
  });

  it('refuses a replication factor above the cluster instance count, and min in-sync above the replication factor', async () => {
    // the chain's cluster has the default 3 instances
    await refused(
      M.topic,
      { projectId: chain.projectId, clusterId: chain.clusterId, name: 't', replicationFactor: 4 },
      'input.replicationFactor',
    );
    await refused(
      M.topic,
      { projectId: chain.projectId, clusterId: chain.clusterId, name: 't', replicationFactor: 2, minInsyncReplicas: 3 },
      'input.minInsyncReplicas',
    );
  });

  it('refuses non-positive counts and sizes', async () => {
    await refused(M.network, { projectId: chain.projectId, title: 'n', bandwidthMbps: 0 }, 'input.bandwidthMbps');
    await refused(
      M.cluster,
      { projectId: chain.projectId, title: 'k', instanceType: 'C2_SMALL', subnetId: chain.subnetId, instanceCount: 0 },
      'input.instanceCount',
    );
    await refused(
      M.cluster,
      { projectId: chain.projectId, title: 'k', instanceType: 'C2_SMALL', subnetId: chain.subnetId, diskSize: -5 },
      'input.diskSize',
    );
    await refused(
      M.topic,
      { projectId: chain.projectId, clusterId: chain.clusterId, name: 't', partitions: 0 },
      'input.partitions',
    );
    await refused(M.vm, vm({ bootDisk: { sizeGb: 0, image: 'DEBIAN_11' } }), 'input.bootDisk.sizeGb');
  });

  it('refuses parent ids that the ledger knows to be of the wrong kind', async () => {
    const e = await refused(
      M.subnet,
      { projectId: chain.projectId, networkId: chain.projectId, title: 's', cidr: '10.1.0.0/24' },
      'input.networkId',
    );
    expect(e.message).toContain('is a project, not a network');
    await refused(M.network, { projectId: chain.networkId, title: 'n' }, 'input.projectId');
    await refused(M.topic, { projectId: chain.projectId, clusterId: chain.subnetId, name: 't' }, 'input.clusterId');
    await refused(
      M.vm,
      vm({
        networkInterfaces: [{ networkId: chain.networkId, subnetId: chain.subnetId, ipAddressId: chain.clusterId }],
      }),
      'input.networkInterfaces[0].ipAddressId',
    );
  });

  it('refuses a VM with no network interface', async () => {
    await refused(M.vm, vm({ networkInterfaces: [] }), 'input.networkInterfaces');
  });

  it('refuses empty names and titles', async () => {
    await refused(M.project, { name: '  ' }, 'input.name');
    await refused(M.network, { projectId: chain.projectId, title: '' }, 'input.title');
    await refused(M.topic, { projectId: chain.projectId, clusterId: chain.clusterId, name: '' }, 'input.name');
    await refused(
      M.user,
      { projectId: chain.projectId, clusterId: chain.clusterId, name: '', password: 'x' },
      'input.name',
    );
    await refused(
      M.user,
      { projectId: chain.projectId, clusterId: chain.clusterId, name: 'u', password: '' },
      'input.password',
    );
  });

  it('refuses negative millisecond fields and malformed decimal strings', async () => {
    await refused(
      M.topic,
      { projectId: chain.projectId, clusterId: chain.clusterId, name: 't', deleteRetentionMs: '-5' },
      'input.deleteRetentionMs',
    );
    const res = await gw.graphql(M.topic, {
      input: { projectId: chain.projectId, clusterId: chain.clusterId, name: 't', retentionMs: '12abc' },
    });
    expect(res.errors![0]!.extensions!.code).toBe('BAD_USER_INPUT');
    expect(res.errors![0]!.message).toContain('DecimalString');
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
  });

  it('refuses an unknown enum value and a malformed UUID through GraphQL variable coercion', async () => {
    const res = await gw.graphql(M.network, { input: { projectId: 'not-a-uuid', title: 'n' } });
    expect(res.status).toBe(400);
    expect(res.errors![0]!.extensions!.code).toBe('BAD_USER_INPUT');
    const res2 = await gw.graphql(M.cluster, {
      input: { projectId: chain.projectId, title: 'k', instanceType: 'C1_SMALL', subnetId: chain.subnetId },
    });
    expect(res2.errors![0]!.extensions!.code).toBe('BAD_USER_INPUT');
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
  });

  it('requires the cluster network and CIDR when the ledger does not know the subnet', async () => {
    await refused(
      M.cluster,
      { projectId: chain.projectId, title: 'k', instanceType: 'C2_SMALL', subnetId: randomUUID() },
      'input.networkId',
    );
  });

  it('refuses a malformed SSH key', async () => {
    await refused(M.vm, vm({ users: [{ name: 'ops', sshKeys: ['my key'] }] }), 'input.users[0].sshKeys[0]');
  });
});
