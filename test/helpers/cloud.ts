import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';

import type { TestGateway } from './gateway.js';
import { storeSnapshot } from './store.js';

export const SSH_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHrZ0m3b4pZ1t0cGmV7w4b0D8x2Xo0y1cT3p8u5sQk9L dev@example';

export const M = {
  project: `mutation($input: CreateProjectInput!, $key: UUID) { createProject(input: $input, idempotencyKey: $key) { project { id name description } idempotencyKey upstreamIdempotencyKey replayed } }`,
  network: `mutation($input: CreateNetworkInput!, $key: UUID) { createNetwork(input: $input, idempotencyKey: $key) { network { id title bandwidthMbps } idempotencyKey upstreamIdempotencyKey replayed } }`,
  subnet: `mutation($input: CreateSubnetInput!, $key: UUID) { createSubnet(input: $input, idempotencyKey: $key) { subnet { id cidr networkId } idempotencyKey upstreamIdempotencyKey replayed } }`,
  ip: `mutation($input: CreateIpAddressInput!, $key: UUID) { createIpAddress(input: $input, idempotencyKey: $key) { ipAddress { id address networkId } idempotencyKey upstreamIdempotencyKey replayed } }`,
  cluster: `mutation($input: CreateKafkaClusterInput!, $key: UUID) { createKafkaCluster(input: $input, idempotencyKey: $key) { kafkaCluster { id title instanceCount subnetCidr networkId publicIp } idempotencyKey upstreamIdempotencyKey replayed } }`,
  topic: `mutation($input: CreateKafkaTopicInput!, $key: UUID) { createKafkaTopic(input: $input, idempotencyKey: $key) { kafkaTopic { id name retentionMs } idempotencyKey upstreamIdempotencyKey replayed } }`,
  user: `mutation($input: CreateKafkaUserInput!, $key: UUID) { createKafkaUser(input: $input, idempotencyKey: $key) { kafkaUser { id name acls { pattern patternType operation } } idempotencyKey upstreamIdempotencyKey replayed } }`,
  provisionKafka: `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) { provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } } }`,
  provisionVm: `mutation($input: ProvisionVirtualMachineInput!, $key: UUID) { provisionVirtualMachine(input: $input, idempotencyKey: $key) { provisioning { id state } } }`,
  vm: `mutation($input: CreateVirtualMachineInput!, $key: UUID) { createVirtualMachine(input: $input, idempotencyKey: $key) { virtualMachine { id title bootDisk { imageId iops } users { name hasPassword } } idempotencyKey upstreamIdempotencyKey replayed } }`,
};

/** Runs a mutation and returns its payload, failing the test on any GraphQL error. */
export async function ok<T = any>(
  gw: TestGateway,
  query: string,
  variables: Record<string, unknown>,
  key?: string,
): Promise<T> {
  const res = await gw.graphql(query, variables, key ? { key } : {});
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return Object.values(res.data!)[0] as T;
}

export interface Chain {
  projectId: string;
  networkId: string;
  subnetId: string;
  ipId: string;
  clusterId: string;
  topicId: string;
  userId: string;
  vmId: string;
}

/** project → network → subnet → IP → Kafka cluster → topic → user → VM, through GraphQL. */
export async function createChain(gw: TestGateway, apiKey?: string): Promise<Chain> {
  const projectId = (await ok(gw, M.project, { input: { name: 'chain', description: 'test chain' } }, apiKey)).project
    .id;
  const networkId = (await ok(gw, M.network, { input: { projectId, title: 'net-1', bandwidthMbps: 200 } }, apiKey))
    .network.id;
  const subnetId = (
    await ok(gw, M.subnet, { input: { projectId, networkId, title: 'subnet-1', cidr: '10.10.0.0/24' } }, apiKey)
  ).subnet.id;
  const ipId = (await ok(gw, M.ip, { input: { projectId, networkId, title: 'ip-1' } }, apiKey)).ipAddress.id;
  const clusterId = (
    await ok(
      gw,
      M.cluster,
      { input: { projectId, title: 'kafka-1', instanceType: 'C2_MEDIUM', subnetId, publicIp: '203.0.113.10' } },
      apiKey,
    )
  ).kafkaCluster.id;
  const topicId = (
    await ok(
      gw,
      M.topic,
      { input: { projectId, clusterId, name: 'events', partitions: 3, replicationFactor: 3, minInsyncReplicas: 2 } },
      apiKey,
    )
  ).kafkaTopic.id;
  const userId = (
    await ok(gw, M.user, { input: { projectId, clusterId, name: 'app', password: 'S3cret-kafka-pass!' } }, apiKey)
  ).kafkaUser.id;
  const vmId = (
    await ok(
      gw,
      M.vm,
      {
        input: {
          projectId,
          title: 'vm-1',
          instanceType: 'C2_MEDIUM',
          bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
          users: [{ name: 'ops', password: 'Vm-pa55word!', sshKeys: [SSH_KEY] }],
          networkInterfaces: [{ networkId, subnetId, ipAddressId: ipId }],
        },
      },
      apiKey,
    )
  ).virtualMachine.id;
  return { projectId, networkId, subnetId, ipId, clusterId, topicId, userId, vmId };
}

/**
 * `query` with `input` (and a fresh idempotency key) is refused whole before the wire: one BAD_USER_INPUT on `field`
 * saying `message`, no request to the cloud upstream, nothing stored (once the provisionings are idle: none ran).
 */
export async function refusedBeforeTheWire(
  gw: TestGateway,
  query: string,
  input: Record<string, unknown>,
  field: string,
  message: string,
): Promise<void> {
  const before = await storeSnapshot(gw);
  const sent = gw.gateway.sandbox.cloud!.requests.length;
  const res = await gw.graphql(query, { input, key: randomUUID() });
  await gw.gateway.services.provisioning.idle();
  expect(res.data, JSON.stringify(res.data)).toBeNull();
  expect(res.errors).toHaveLength(1);
  expect(res.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field });
  expect(res.errors![0]!.message).toBe(`${field}: ${message}`);
  expect(gw.gateway.sandbox.cloud!.requests.length).toBe(sent);
  expect(await storeSnapshot(gw)).toEqual(before);
}

/** The creations the gateway's own cloud sandbox received (POSTs, its token requests aside), in order. */
export function upstreamCreations(gw: TestGateway) {
  return gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'));
}
