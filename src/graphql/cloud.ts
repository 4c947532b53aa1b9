import { bootDiskIops, fromWire } from '../catalog/index.js';
import type { MutationResult } from '../cloud/service.js';
import { ipAddressOf } from '../cloud/views.js';
import type { KafkaClusterSpec, KafkaTopicSpec, KafkaUserSpec, NetworkSpec, SubnetSpec, VirtualMachineSpec } from '../cloud/model.js';
import type { Resolvers } from '../generated/graphql.js';
import type { LedgerRecord } from '../store/ledger.js';
import type { GraphQLContext } from './context.js';

/** The stored, non-secret spec of a ledger record, typed for its kind. */
function spec<T>(r: LedgerRecord): T {
  return r.spec as T;
}

type PayloadKeys = { idempotencyKey: string; upstreamIdempotencyKey: string; replayed: boolean };

function payload<K extends string>(field: K, r: MutationResult): { [P in K]: LedgerRecord } & PayloadKeys {
  return { [field]: r.record, idempotencyKey: r.idempotencyKey, upstreamIdempotencyKey: r.upstreamIdempotencyKey, replayed: r.replayed } as {
    [P in K]: LedgerRecord;
  } & PayloadKeys;
}

const common = {
  createdAt: (r: LedgerRecord) => r.createdAt,
  raw: (r: LedgerRecord) => r.response,
};

export const cloudResolvers: Resolvers = {
  Query: {
    projects: (_p, { first, offset }, ctx) =>
      ctx.services.ledger.list('project', { limit: Math.min(Math.max(first ?? 50, 1), 500), offset: Math.max(offset ?? 0, 0) }),
    project: (_p, { id }, ctx) => ctx.loaders.ofKind(id, 'project'),
  },
  Mutation: {
    createProject: async (_p, { input, idempotencyKey }, ctx) =>
      payload('project', await ctx.services.cloud.createProject(ctx.caller, input, idempotencyKey)),
    createNetwork: async (_p, { input, idempotencyKey }, ctx) =>
      payload('network', await ctx.services.cloud.createNetwork(ctx.caller, input, idempotencyKey)),
    createSubnet: async (_p, { input, idempotencyKey }, ctx) =>
      payload('subnet', await ctx.services.cloud.createSubnet(ctx.caller, input, idempotencyKey)),
    createIpAddress: async (_p, { input, idempotencyKey }, ctx) =>
      payload('ipAddress', await ctx.services.cloud.createIpAddress(ctx.caller, input, idempotencyKey)),
    createKafkaCluster: async (_p, { input, idempotencyKey }, ctx) =>
      payload('kafkaCluster', await ctx.services.cloud.createKafkaCluster(ctx.caller, input, idempotencyKey)),
    createKafkaTopic: async (_p, { input, idempotencyKey }, ctx) =>
      payload('kafkaTopic', await ctx.services.cloud.createKafkaTopic(ctx.caller, input, idempotencyKey)),
    createKafkaUser: async (_p, { input, idempotencyKey }, ctx) =>
      payload('kafkaUser', await ctx.services.cloud.createKafkaUser(ctx.caller, input, idempotencyKey)),
    createVirtualMachine: async (_p, { input, idempotencyKey }, ctx) =>
      payload('virtualMachine', await ctx.services.cloud.createVirtualMachine(ctx.caller, input, idempotencyKey)),
  },
  Project: {
    ...common,
    name: (r) => r.title ?? '',
    description: (r) => String(r.spec.description ?? ''),
    networks: (r, _a, ctx) => ctx.loaders.inProject('network').load(r.id),
    kafkaClusters: (r, _a, ctx) => ctx.loaders.inProject('kafka_cluster').load(r.id),
    virtualMachines: (r, _a, ctx) => ctx.loaders.inProject('virtual_machine').load(r.id),
  },
  Network: {
    ...common,
    project: (r, _a, ctx) => ctx.loaders.ofKind(r.projectId, 'project'),
    title: (r) => spec<NetworkSpec>(r).title,
    description: (r) => spec<NetworkSpec>(r).description,
    bandwidthMbps: (r) => spec<NetworkSpec>(r).bandwidthMbps,
    defaultFirewallAction: (r) => spec<NetworkSpec>(r).defaultFirewallAction,
    region: (r) => spec<NetworkSpec>(r).region,
    zone: (r) => spec<NetworkSpec>(r).zone,
    subnets: (r, _a, ctx) => ctx.loaders.children('subnet').load(r.id),
    ipAddresses: (r, _a, ctx) => ctx.loaders.children('ip_address').load(r.id),
  },
  Subnet: {
    ...common,
    network: (r, _a, ctx) => ctx.loaders.ofKind(r.parentId, 'network'),
    networkId: (r) => spec<SubnetSpec>(r).networkId,
    title: (r) => spec<SubnetSpec>(r).title,
    description: (r) => spec<SubnetSpec>(r).description,
    cidr: (r) => spec<SubnetSpec>(r).cidr,
  },
  IpAddress: {
    ...common,
    network: (r, _a, ctx) => ctx.loaders.ofKind(r.parentId, 'network'),
    networkId: (r) => r.parentId ?? '',
    title: (r) => r.title ?? '',
    description: (r) => String(r.spec.description ?? ''),
    address: (r) => ipAddressOf(r),
  },
  KafkaCluster: {
    ...common,
    project: (r, _a, ctx) => ctx.loaders.ofKind(r.projectId, 'project'),
    title: (r) => spec<KafkaClusterSpec>(r).title,
    description: (r) => spec<KafkaClusterSpec>(r).description,
    instanceCount: (r) => spec<KafkaClusterSpec>(r).instanceCount,
    cpuUtilization: (r) => spec<KafkaClusterSpec>(r).cpuUtilization,
    diskSize: (r) => spec<KafkaClusterSpec>(r).diskSize,
    diskType: (r) => spec<KafkaClusterSpec>(r).diskType,
    instanceType: (r) => spec<KafkaClusterSpec>(r).instanceType,
    kafkaVersion: (r) => spec<KafkaClusterSpec>(r).kafkaVersion,
    networkId: (r) => spec<KafkaClusterSpec>(r).networkId,
    network: (r, _a, ctx) => ctx.loaders.ofKind(spec<KafkaClusterSpec>(r).networkId, 'network'),
    subnetId: (r) => spec<KafkaClusterSpec>(r).subnetId,
    subnet: (r, _a, ctx) => ctx.loaders.ofKind(spec<KafkaClusterSpec>(r).subnetId, 'subnet'),
    subnetCidr: (r) => spec<KafkaClusterSpec>(r).subnetCidr,
    publicIp: (r) => spec<KafkaClusterSpec>(r).publicIp,
    region: (r) => spec<KafkaClusterSpec>(r).region,
    zone: (r) => spec<KafkaClusterSpec>(r).zone,
    topics: (r, _a, ctx) => ctx.loaders.children('kafka_topic').load(r.id),
    users: (r, _a, ctx) => ctx.loaders.children('kafka_user').load(r.id),
  },
  KafkaTopic: {
    ...common,
    cluster: (r, _a, ctx) => ctx.loaders.ofKind(r.parentId, 'kafka_cluster'),
    clusterId: (r) => spec<KafkaTopicSpec>(r).clusterId,
    name: (r) => spec<KafkaTopicSpec>(r).name,
    partitions: (r) => spec<KafkaTopicSpec>(r).partitions,
    replicationFactor: (r) => spec<KafkaTopicSpec>(r).replicationFactor,
    compressionType: (r) => spec<KafkaTopicSpec>(r).compressionType,
    maxMessageBytes: (r) => spec<KafkaTopicSpec>(r).maxMessageBytes,
    minInsyncReplicas: (r) => spec<KafkaTopicSpec>(r).minInsyncReplicas,
    cleanupPolicy: (r) => spec<KafkaTopicSpec>(r).cleanupPolicy,
    minCompactionLagMs: (r) => spec<KafkaTopicSpec>(r).minCompactionLagMs,
    maxCompactionLagMs: (r) => spec<KafkaTopicSpec>(r).maxCompactionLagMs,
    deleteRetentionMs: (r) => spec<KafkaTopicSpec>(r).deleteRetentionMs,
    retentionBytes: (r) => spec<KafkaTopicSpec>(r).retentionBytes,
    retentionMs: (r) => spec<KafkaTopicSpec>(r).retentionMs,
  },
  KafkaUser: {
    ...common,
    cluster: (r, _a, ctx) => ctx.loaders.ofKind(r.parentId, 'kafka_cluster'),
    clusterId: (r) => spec<KafkaUserSpec>(r).clusterId,
    name: (r) => spec<KafkaUserSpec>(r).name,
    acls: (r) => spec<KafkaUserSpec>(r).acls,
    groupAcls: (r) => spec<KafkaUserSpec>(r).groupAcls,
  },
  VirtualMachine: {
    ...common,
    project: (r, _a, ctx) => ctx.loaders.ofKind(r.projectId, 'project'),
    title: (r) => spec<VirtualMachineSpec>(r).title,
    description: (r) => spec<VirtualMachineSpec>(r).description,
    platform: (r) => spec<VirtualMachineSpec>(r).platform,
    instanceType: (r) => spec<VirtualMachineSpec>(r).instanceType,
    bootDisk: (r) => {
      const d = spec<VirtualMachineSpec>(r).bootDisk;
      return {
        sizeGb: d.sizeGb,
        diskType: d.diskType,
        image: d.image ?? fromWire('OsImage', d.imageId) ?? null,
        imageId: d.imageId,
        iops: bootDiskIops(d.diskType, d.sizeGb),
      };
    },
    users: (r) => (r.spec.users as { name: string; sshKeys: string[]; hasPassword: boolean }[]) ?? [],
    networkInterfaces: (r) =>
      spec<VirtualMachineSpec>(r).networkInterfaces.map((n) => ({ ...n, network: null, subnet: null, ipAddress: null })),
    promo: (r) => spec<VirtualMachineSpec>(r).promo,
    region: (r) => spec<VirtualMachineSpec>(r).region,
    zone: (r) => spec<VirtualMachineSpec>(r).zone,
  },
  VmNetworkInterface: {
    network: (n, _a, ctx) => ctx.loaders.ofKind(n.networkId, 'network'),
    subnet: (n, _a, ctx) => ctx.loaders.ofKind(n.subnetId, 'subnet'),
    ipAddress: (n, _a, ctx) => ctx.loaders.ofKind(n.ipAddressId, 'ip_address'),
  },
};
