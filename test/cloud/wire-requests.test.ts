import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { RecordedRequest } from '../../src/sandbox/cloud.js';
import { createChain, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('each cloud mutation sends the exact upstream request of the spec', () => {
  let gw: TestGateway;
  let chain: Chain;
  let requests: RecordedRequest[];

  beforeAll(async () => {
    gw = await startTestGateway();
    chain = await createChain(gw);
    requests = gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST');
  });
  afterAll(() => gw.close());

  const byKind = (kind: string, productCode?: string) =>
    requests.find((r) => {
      const b = r.body as { kind?: string; platform?: { productCode?: string } };
      return (
        r.path === '/ocs/v1/services' && b.kind === kind && (!productCode || b.platform?.productCode === productCode)
      );
    })!;

  it('makes one upstream call per mutation, each with Bearer auth, JSON content type and a UUID Idempotency-Key', () => {
    expect(requests).toHaveLength(8);
    for (const r of requests) {
      expect(r.status).toBe(201);
      expect(r.headers.authorization).toBe('Bearer sandbox-service-account-token');
      expect(r.headers['content-type']).toMatch(/^application\/json/);
      expect(r.headers['idempotency-key']).toMatch(UUID);
    }
    expect(new Set(requests.map((r) => r.headers['idempotency-key'])).size).toBe(8);
  });

  it('sends Accept: application/json on cluster, topic, user and VM creation only, as the spec shows', () => {
    const withAccept = requests
      .filter((r) => r.headers.accept === 'application/json')
      .map((r) => (r.body as { kind?: string }).kind);
    expect(withAccept.sort()).toEqual(['compute', 'compute', 'topic', 'user']);
    expect(requests[0]!.headers.accept).toBeUndefined();
  });

  it('creates the project with name and description', () => {
    const r = requests[0]!;
    expect(r.path).toBe('/apis/projects/public/v4/projects');
    expect(r.body).toEqual({ name: 'chain', description: 'test chain' });
  });

  it('sends the network envelope with the literal dotted spec key', () => {
    expect(byKind('network').body).toEqual({
      platform: { productCode: 'network', regionCode: 'msk' },
      kind: 'network',
      metadata: { title: 'net-1', description: '' },
      projectId: chain.projectId,
      spec: { 'vendor.extensions.network': { bandwidth_mbps: 200, default_gfw_rule_action: 'allow' } },
      zoneCode: 'msk-avntg',
    });
  });

  it('binds subnet and IP address to their network', () => {
    expect(byKind('subnet').body).toEqual({
      platform: { productCode: 'network', regionCode: 'msk' },
      kind: 'subnet',
      metadata: { title: 'subnet-1', description: '' },
      projectId: chain.projectId,
      parentBinding: { targetId: chain.networkId },
      spec: { 'vendor.extensions.subnet': { cidr: '10.10.0.0/24' } },
      zoneCode: 'msk-avntg',
    });
    expect(byKind('ip').body).toMatchObject({ kind: 'ip', parentBinding: { targetId: chain.networkId }, spec: {} });
  });

  it('sends the Kafka cluster spec with the CIDR and network taken from the ledger and white_host when publicIp is given', () => {
    const body = byKind('compute', 'vendor-kafka').body as Record<string, any>;
    expect(body.parentBinding).toBeUndefined();
    expect(body.spec).toEqual({
      'vendor.extensions.kafka': {
        instance_count: 3,
        instance_cpu_utilization: 'low',
        instance_disk_size: 50,
        instance_disk_type: 'ssd.basic',
        instance_type: 'c2.medium',
        kafka_version: '3.1.0',
        network_id: chain.networkId,
        subnetwork_id: chain.subnetId,
        subnetwork_cidr: '10.10.0.0/24',
        white_host: '203.0.113.10',
      },
    });
  });

  it('sends topic millisecond and byte fields as decimal strings', () => {
    const body = byKind('topic').body as Record<string, any>;
    expect(body.parentBinding).toEqual({ targetId: chain.clusterId });
    const spec = body.spec['vendor.extensions.topic'];
    expect(spec).toEqual({
      name: 'events',
      num_partitions: 3,
      replication_factor: 3,
      compression_type: 'producer',
      max_message_bytes: 1048588,
      min_insync_replicas: 2,
      cleanup_policy: 'delete',
      min_compaction_lag_ms: '0',
      max_compaction_lag_ms: '9223372036854775807',
      delete_retention_ms: '86400000',
      retention_bytes: '-1',
      retention_ms: '604800000',
    });
  });

  it('sends the Kafka user with its ACLs in snake_case and the password once', () => {
    const body = byKind('user').body as Record<string, any>;
    expect(body.spec['vendor.extensions.user']).toEqual({
      name: 'app',
      password: 'S3cret-kafka-pass!',
      acls: [{ pattern: '*', pattern_type: 'literal', operation: 'rw' }],
      groups_acls: [],
    });
  });

  it('sends the VM spec with the image enum mapped to its UUID', () => {
    const body = byKind('compute', 'compute-cloud').body as Record<string, any>;
    expect(body.platform).toEqual({ productCode: 'compute-cloud', regionCode: 'msk' });
    expect(body.spec).toEqual({
      instance: { instanceType: 'c2.medium', platformId: 'compute.v3' },
      bootDisk: { sizeGb: 20, diskType: 'ssd.basic', sourceImageId: 'cd354813-aff7-423b-9d16-6820bce249f9' },
      secondaryDisks: [],
      users: [{ name: 'ops', password: 'Vm-pa55word!', sshKeys: [expect.stringMatching(/^ssh-ed25519 /)] }],
      networkInterfaces: [{ networkId: chain.networkId, subnetworkId: chain.subnetId, natIpId: chain.ipId }],
      'vendor.extensions.promo': { is_promo: false },
    });
  });

  it('omits white_host when no publicIp is given and accepts ms fields as numbers or strings', async () => {
    gw.gateway.sandbox.cloud!.clearRequests();
    const c = await gw.graphql(
      `mutation($i: CreateKafkaClusterInput!) { createKafkaCluster(input: $i) { kafkaCluster { id publicIp } } }`,
      {
        i: {
          projectId: chain.projectId,
          title: 'private',
          instanceType: 'C1_MEDIUM',
          subnetId: chain.subnetId,
          instanceCount: 1,
        },
      },
    );
    expect(c.errors).toBeUndefined();
    const t = await gw.graphql(
      `mutation($i: CreateKafkaTopicInput!) { createKafkaTopic(input: $i) { kafkaTopic { retentionMs deleteRetentionMs } } }`,
      {
        i: {
          projectId: chain.projectId,
          clusterId: c.data!.createKafkaCluster.kafkaCluster.id,
          name: 't',
          retentionMs: 3600000,
          deleteRetentionMs: '1000',
        },
      },
    );
    expect(t.errors).toBeUndefined();
    expect(t.data!.createKafkaTopic.kafkaTopic).toEqual({ retentionMs: '3600000', deleteRetentionMs: '1000' });
    const [clusterReq, topicReq] = gw.gateway.sandbox.cloud!.requests as RecordedRequest[];
    expect((clusterReq!.body as any).spec['vendor.extensions.kafka']).not.toHaveProperty('white_host');
    expect((topicReq!.body as any).spec['vendor.extensions.topic'].retention_ms).toBe('3600000');
  });
});
