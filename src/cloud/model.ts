import type {
  CpuUtilizationName,
  DiskTypeName,
  FirewallActionName,
  InstanceTypeName,
  KafkaInstanceTypeName,
  KafkaVersionName,
  OsImageName,
  PlatformName,
} from '../catalog/index.js';

/**
 * The normalized specs of cloud resources: every default applied, every id resolved. Validation makes
 * them from GraphQL input, wire.ts turns them into upstream requests, and the ledger stores them (with
 * secrets removed) to answer queries.
 */
export type Region = 'MSK';
export type Zone = 'MSK_AVNTG';

export const REGION_WIRE: Record<Region, string> = { MSK: 'msk' };
export const ZONE_WIRE: Record<Zone, string> = { MSK_AVNTG: 'msk-avntg' };

export interface Placement {
  region: Region;
  zone: Zone;
}

export interface ProjectSpec {
  name: string;
  description: string;
}

export interface NetworkSpec extends Placement {
  projectId: string;
  title: string;
  description: string;
  bandwidthMbps: number;
  defaultFirewallAction: FirewallActionName;
}

export interface SubnetSpec extends Placement {
  projectId: string;
  networkId: string;
  title: string;
  description: string;
  cidr: string;
}

export interface IpAddressSpec extends Placement {
  projectId: string;
  networkId: string;
  title: string;
  description: string;
}

export interface KafkaClusterSpec extends Placement {
  projectId: string;
  title: string;
  description: string;
  instanceCount: number;
  cpuUtilization: CpuUtilizationName;
  diskSize: number;
  diskType: DiskTypeName;
  instanceType: KafkaInstanceTypeName;
  kafkaVersion: KafkaVersionName;
  networkId: string;
  subnetId: string;
  subnetCidr: string;
  publicIp: string | null;
}

export interface KafkaTopicSpec extends Placement {
  projectId: string;
  clusterId: string;
  name: string;
  partitions: number;
  replicationFactor: number;
  compressionType: string;
  maxMessageBytes: number;
  minInsyncReplicas: number;
  cleanupPolicy: string;
  minCompactionLagMs: string;
  maxCompactionLagMs: string;
  deleteRetentionMs: string;
  retentionBytes: string;
  retentionMs: string;
}

export interface KafkaAcl {
  pattern: string;
  patternType: string;
  operation: string;
}

export interface KafkaGroupAcl {
  pattern: string;
  patternType: string;
}

export interface KafkaUserSpec extends Placement {
  projectId: string;
  clusterId: string;
  name: string;
  /** Secret: sent upstream, never stored (see `withoutSecrets`). */
  password: string;
  acls: KafkaAcl[];
  groupAcls: KafkaGroupAcl[];
}

export interface VmUser {
  name: string;
  /** Secret: sent upstream, never stored. */
  password: string | null;
  sshKeys: string[];
}

export interface VirtualMachineSpec extends Placement {
  projectId: string;
  title: string;
  description: string;
  platform: PlatformName;
  instanceType: InstanceTypeName;
  bootDisk: { sizeGb: number; diskType: DiskTypeName; image: OsImageName | null; imageId: string };
  users: VmUser[];
  networkInterfaces: { networkId: string; subnetId: string; ipAddressId: string }[];
  promo: boolean;
}

/** What the ledger keeps of a spec: passwords replaced by whether one was set. */
export function withoutSecrets(kind: string, spec: object): Record<string, unknown> {
  if (kind === 'kafka_user') {
    const { password: _password, ...rest } = spec as KafkaUserSpec;
    return { ...rest };
  }
  if (kind === 'virtual_machine') {
    const vm = spec as VirtualMachineSpec;
    return {
      ...vm,
      users: vm.users.map((u) => ({
        name: u.name,
        sshKeys: u.sshKeys,
        hasPassword: u.password !== null && u.password !== '',
      })),
    };
  }
  return { ...spec };
}
