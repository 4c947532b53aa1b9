// The reference data of the cloud provisioning spec (docs/upstreams.md, Cloud provisioning), written once.
// `name` is the GraphQL enum value, `wire` the exact string the cloud API takes. schema/catalog.graphql
// declares the same enums; test/catalog/catalog-enums.test.ts fails when the two drift apart.

interface WireValue {
  readonly name: string;
  readonly wire: string;
}

/** Freezes the rows and the arrays inside them, so the shared tables cannot be changed at run time. */
function frozen<T extends object>(rows: readonly T[]): readonly T[] {
  for (const row of rows) {
    for (const value of Object.values(row)) if (Array.isArray(value)) Object.freeze(value);
    Object.freeze(row);
  }
  return Object.freeze(rows);
}

// Platforms (Virtual machine > Platforms).
const platformRows = [
  { name: 'COMPUTE_V2', wire: 'compute.v2', cpu: 'server CPU, 2.2 GHz', clockGhz: 2.2, gpu: false },
  { name: 'COMPUTE_V3', wire: 'compute.v3', cpu: 'server CPU, 2.6 GHz', clockGhz: 2.6, gpu: false },
  { name: 'COMPUTE_GPU_V1', wire: 'compute.gpu.v1', cpu: 'server CPU, 2.6 GHz, with GPU', clockGhz: 2.6, gpu: true },
] as const satisfies readonly (WireValue & { cpu: string; clockGhz: number; gpu: boolean })[];

export type PlatformName = (typeof platformRows)[number]['name'];
export type PlatformWire = (typeof platformRows)[number]['wire'];
export interface PlatformEntry {
  readonly name: PlatformName;
  /** `instance.platformId` of a virtual machine. */
  readonly wire: PlatformWire;
  /** The spec's CPU column, verbatim. */
  readonly cpu: string;
  readonly clockGhz: number;
  readonly gpu: boolean;
}
export const PLATFORMS: readonly PlatformEntry[] = frozen(platformRows);

// "Instance types for compute.v2 and compute.v3 (identical lists)".
const CPU_PLATFORMS = ['COMPUTE_V2', 'COMPUTE_V3'] as const satisfies readonly PlatformName[];
const GPU_PLATFORMS = ['COMPUTE_GPU_V1'] as const satisfies readonly PlatformName[];

// Virtual machine instance types: the compute.v2/v3 table, then the compute.gpu.v1 table.
const instanceTypeRows = [
  { name: 'C1_SMALL', wire: 'c1.small', vcpu: 1, memoryMb: 1024, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C1_MEDIUM', wire: 'c1.medium', vcpu: 1, memoryMb: 2048, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C1_LARGE', wire: 'c1.large', vcpu: 1, memoryMb: 4096, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C1_XLARGE', wire: 'c1.xlarge', vcpu: 1, memoryMb: 8192, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C2_SMALL', wire: 'c2.small', vcpu: 2, memoryMb: 2048, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C2_MEDIUM', wire: 'c2.medium', vcpu: 2, memoryMb: 4096, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C2_LARGE', wire: 'c2.large', vcpu: 2, memoryMb: 8192, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C2_XLARGE', wire: 'c2.xlarge', vcpu: 2, memoryMb: 16384, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C4_SMALL', wire: 'c4.small', vcpu: 4, memoryMb: 4096, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C4_MEDIUM', wire: 'c4.medium', vcpu: 4, memoryMb: 8192, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C4_LARGE', wire: 'c4.large', vcpu: 4, memoryMb: 16384, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C4_XLARGE', wire: 'c4.xlarge', vcpu: 4, memoryMb: 32768, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C6_SMALL', wire: 'c6.small', vcpu: 6, memoryMb: 6144, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C6_MEDIUM', wire: 'c6.medium', vcpu: 6, memoryMb: 12288, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C6_LARGE', wire: 'c6.large', vcpu: 6, memoryMb: 18432, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C6_XLARGE', wire: 'c6.xlarge', vcpu: 6, memoryMb: 49152, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C8_SMALL', wire: 'c8.small', vcpu: 8, memoryMb: 8192, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C8_MEDIUM', wire: 'c8.medium', vcpu: 8, memoryMb: 16384, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C8_LARGE', wire: 'c8.large', vcpu: 8, memoryMb: 24576, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C8_XLARGE', wire: 'c8.xlarge', vcpu: 8, memoryMb: 65536, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C10_SMALL', wire: 'c10.small', vcpu: 10, memoryMb: 10240, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C10_MEDIUM', wire: 'c10.medium', vcpu: 10, memoryMb: 20480, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C10_LARGE', wire: 'c10.large', vcpu: 10, memoryMb: 30720, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C10_XLARGE', wire: 'c10.xlarge', vcpu: 10, memoryMb: 81920, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C12_SMALL', wire: 'c12.small', vcpu: 12, memoryMb: 12288, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C12_MEDIUM', wire: 'c12.medium', vcpu: 12, memoryMb: 24576, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C12_LARGE', wire: 'c12.large', vcpu: 12, memoryMb: 49152, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C12_XLARGE', wire: 'c12.xlarge', vcpu: 12, memoryMb: 98304, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C16_SMALL', wire: 'c16.small', vcpu: 16, memoryMb: 16384, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C16_MEDIUM', wire: 'c16.medium', vcpu: 16, memoryMb: 32768, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C16_LARGE', wire: 'c16.large', vcpu: 16, memoryMb: 65536, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C16_XLARGE', wire: 'c16.xlarge', vcpu: 16, memoryMb: 131072, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C20_SMALL', wire: 'c20.small', vcpu: 20, memoryMb: 20480, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C20_MEDIUM', wire: 'c20.medium', vcpu: 20, memoryMb: 40960, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C20_LARGE', wire: 'c20.large', vcpu: 20, memoryMb: 81920, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C20_XLARGE', wire: 'c20.xlarge', vcpu: 20, memoryMb: 163840, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C24_SMALL', wire: 'c24.small', vcpu: 24, memoryMb: 24576, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C24_MEDIUM', wire: 'c24.medium', vcpu: 24, memoryMb: 49152, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C24_LARGE', wire: 'c24.large', vcpu: 24, memoryMb: 98304, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C24_XLARGE', wire: 'c24.xlarge', vcpu: 24, memoryMb: 196608, gpus: 0, platforms: CPU_PLATFORMS },
  { name: 'C32_G1_LARGE', wire: 'c32.g1.large', vcpu: 32, memoryMb: 163840, gpus: 1, platforms: GPU_PLATFORMS },
  { name: 'C64_G2_LARGE', wire: 'c64.g2.large', vcpu: 64, memoryMb: 327680, gpus: 2, platforms: GPU_PLATFORMS },
] as const satisfies readonly (WireValue & {
  vcpu: number;
  memoryMb: number;
  gpus: number;
  platforms: readonly PlatformName[];
})[];

export type InstanceTypeName = (typeof instanceTypeRows)[number]['name'];
export type InstanceTypeWire = (typeof instanceTypeRows)[number]['wire'];
export interface InstanceTypeEntry {
  readonly name: InstanceTypeName;
  /** `instance.instanceType` of a virtual machine. */
  readonly wire: InstanceTypeWire;
  readonly vcpu: number;
  readonly memoryMb: number;
  readonly gpus: number;
  /** The platforms (`instance.platformId`) that accept this type. */
  readonly platforms: readonly PlatformName[];
}
export const INSTANCE_TYPES: readonly InstanceTypeEntry[] = frozen(instanceTypeRows);

// Kafka instance types (Kafka cluster table): there is no c1.small.
const kafkaInstanceTypeRows = [
  { name: 'C1_MEDIUM', wire: 'c1.medium', cpu: 1, ramGb: 2 },
  { name: 'C1_LARGE', wire: 'c1.large', cpu: 1, ramGb: 4 },
  { name: 'C2_SMALL', wire: 'c2.small', cpu: 2, ramGb: 2 },
  { name: 'C2_MEDIUM', wire: 'c2.medium', cpu: 2, ramGb: 4 },
  { name: 'C2_LARGE', wire: 'c2.large', cpu: 2, ramGb: 8 },
  { name: 'C4_SMALL', wire: 'c4.small', cpu: 4, ramGb: 4 },
  { name: 'C4_MEDIUM', wire: 'c4.medium', cpu: 4, ramGb: 8 },
  { name: 'C4_LARGE', wire: 'c4.large', cpu: 4, ramGb: 16 },
  { name: 'C6_SMALL', wire: 'c6.small', cpu: 6, ramGb: 6 },
  { name: 'C6_MEDIUM', wire: 'c6.medium', cpu: 6, ramGb: 12 },
  { name: 'C6_LARGE', wire: 'c6.large', cpu: 6, ramGb: 18 },
  { name: 'C8_SMALL', wire: 'c8.small', cpu: 8, ramGb: 8 },
  { name: 'C8_MEDIUM', wire: 'c8.medium', cpu: 8, ramGb: 16 },
  { name: 'C8_LARGE', wire: 'c8.large', cpu: 8, ramGb: 24 },
  { name: 'C10_SMALL', wire: 'c10.small', cpu: 10, ramGb: 10 },
  { name: 'C10_MEDIUM', wire: 'c10.medium', cpu: 10, ramGb: 20 },
  { name: 'C10_LARGE', wire: 'c10.large', cpu: 10, ramGb: 30 },
  { name: 'C12_SMALL', wire: 'c12.small', cpu: 12, ramGb: 12 },
  { name: 'C12_MEDIUM', wire: 'c12.medium', cpu: 12, ramGb: 24 },
  { name: 'C12_LARGE', wire: 'c12.large', cpu: 12, ramGb: 48 },
  { name: 'C16_SMALL', wire: 'c16.small', cpu: 16, ramGb: 16 },
  { name: 'C16_MEDIUM', wire: 'c16.medium', cpu: 16, ramGb: 32 },
  { name: 'C16_LARGE', wire: 'c16.large', cpu: 16, ramGb: 64 },
  { name: 'C20_SMALL', wire: 'c20.small', cpu: 20, ramGb: 20 },
  { name: 'C20_MEDIUM', wire: 'c20.medium', cpu: 20, ramGb: 40 },
  { name: 'C20_LARGE', wire: 'c20.large', cpu: 20, ramGb: 80 },
  { name: 'C24_SMALL', wire: 'c24.small', cpu: 24, ramGb: 24 },
  { name: 'C24_MEDIUM', wire: 'c24.medium', cpu: 24, ramGb: 48 },
  { name: 'C24_LARGE', wire: 'c24.large', cpu: 24, ramGb: 96 },
] as const satisfies readonly (WireValue & { cpu: number; ramGb: number })[];

export type KafkaInstanceTypeName = (typeof kafkaInstanceTypeRows)[number]['name'];
export type KafkaInstanceTypeWire = (typeof kafkaInstanceTypeRows)[number]['wire'];
export interface KafkaInstanceTypeEntry {
  readonly name: KafkaInstanceTypeName;
  /** `instance_type` of a Kafka cluster. */
  readonly wire: KafkaInstanceTypeWire;
  readonly cpu: number;
  readonly ramGb: number;
}
export const KAFKA_INSTANCE_TYPES: readonly KafkaInstanceTypeEntry[] = frozen(kafkaInstanceTypeRows);

// Disk types: minimum IOPS from the Kafka table, IOPS per GB from "Boot disk types". ssd.ultra-plus is
// listed for Kafka disks only (bootDisk.diskType allows ssd.basic, ssd.fast, ssd.ultra).
const diskTypeRows = [
  { name: 'SSD_BASIC', wire: 'ssd.basic', minIops: 200, iopsPerGb: 0.4, bootable: true },
  { name: 'SSD_FAST', wire: 'ssd.fast', minIops: 500, iopsPerGb: 2.0, bootable: true },
  { name: 'SSD_ULTRA', wire: 'ssd.ultra', minIops: 1000, iopsPerGb: 10.0, bootable: true },
  { name: 'SSD_ULTRA_PLUS', wire: 'ssd.ultra-plus', minIops: 5000, iopsPerGb: null, bootable: false },
] as const satisfies readonly (WireValue & { minIops: number; iopsPerGb: number | null; bootable: boolean })[];

export type DiskTypeName = (typeof diskTypeRows)[number]['name'];
export type DiskTypeWire = (typeof diskTypeRows)[number]['wire'];
export interface DiskTypeEntry {
  readonly name: DiskTypeName;
  /** `instance_disk_type` of a Kafka cluster, `bootDisk.diskType` of a virtual machine. */
  readonly wire: DiskTypeWire;
  readonly minIops: number;
  /** IOPS per GB of a boot disk; null when the type cannot be a boot disk. */
  readonly iopsPerGb: number | null;
  /** Accepted as a virtual machine's boot disk. Every type is accepted for a Kafka cluster. */
  readonly bootable: boolean;
}
export const DISK_TYPES: readonly DiskTypeEntry[] = frozen(diskTypeRows);

const kafkaVersionRows = [
  { name: 'V2_8_1', wire: '2.8.1' },
  { name: 'V3_1_0', wire: '3.1.0' },
] as const satisfies readonly WireValue[];

export type KafkaVersionName = (typeof kafkaVersionRows)[number]['name'];
export type KafkaVersionWire = (typeof kafkaVersionRows)[number]['wire'];
export interface KafkaVersionEntry {
  readonly name: KafkaVersionName;
  /** `kafka_version` of a Kafka cluster. */
  readonly wire: KafkaVersionWire;
}
export const KAFKA_VERSIONS: readonly KafkaVersionEntry[] = frozen(kafkaVersionRows);

const cpuUtilizationRows = [
  { name: 'LOW', wire: 'low', percent: 20 },
  { name: 'MEDIUM', wire: 'medium', percent: 50 },
  { name: 'HIGH', wire: 'high', percent: 100 },
] as const satisfies readonly (WireValue & { percent: number })[];

export type CpuUtilizationName = (typeof cpuUtilizationRows)[number]['name'];
export type CpuUtilizationWire = (typeof cpuUtilizationRows)[number]['wire'];
export interface CpuUtilizationEntry {
  readonly name: CpuUtilizationName;
  /** `instance_cpu_utilization` of a Kafka cluster. */
  readonly wire: CpuUtilizationWire;
  readonly percent: number;
}
export const CPU_UTILIZATIONS: readonly CpuUtilizationEntry[] = frozen(cpuUtilizationRows);

// "Allowed values of default_gfw_rule_action other than allow: not shown."
const firewallActionRows = [{ name: 'ALLOW', wire: 'allow' }] as const satisfies readonly WireValue[];

export type FirewallActionName = (typeof firewallActionRows)[number]['name'];
export type FirewallActionWire = (typeof firewallActionRows)[number]['wire'];
export interface FirewallActionEntry {
  readonly name: FirewallActionName;
  /** `default_gfw_rule_action` of a network. */
  readonly wire: FirewallActionWire;
}
export const FIREWALL_ACTIONS: readonly FirewallActionEntry[] = frozen(firewallActionRows);

/** The zone the spec's image table is for ("OS images for zoneCode msk-avntg"). */
export const OS_IMAGE_ZONE = 'msk-avntg';

// OS images: the wire value is the image UUID sent as `bootDisk.sourceImageId`.
const osImageRows = [
  { name: 'CENTOS_STREAM_9', wire: 'b251649e-e993-4957-be9c-b0c2c9976c40', title: 'CentOS Stream 9' },
  { name: 'CENTOS_STREAM_8', wire: '3273989e-a173-4ae5-8d3f-e2fe20f641e0', title: 'CentOS Stream 8' },
  { name: 'CENTOS_7', wire: '40c18a90-f4de-407d-b7ac-d425b1064aab', title: 'CentOS 7' },
  { name: 'DEBIAN_11', wire: '51d25ab7-7e48-455c-826d-9e66491580bd', title: 'Debian 11' },
  { name: 'DEBIAN_10', wire: 'e4461471-8d18-4bd7-b336-c5d1820605cc', title: 'Debian 10' },
  { name: 'DEBIAN_9', wire: 'c3016071-e995-411e-a78b-1569cf690540', title: 'Debian 9' },
  { name: 'ROCKY_LINUX_9', wire: '176ecee5-f64b-414e-b540-c27e6c11709f', title: 'Rocky Linux 9' },
  { name: 'ROCKY_LINUX_8', wire: 'a1f7390d-145a-451e-aed2-7fb4199a5cc8', title: 'Rocky Linux 8' },
  { name: 'UBUNTU_22_04', wire: 'cd354813-aff7-423b-9d16-6820bce249f9', title: 'Ubuntu 22.04 LTS Server' },
] as const satisfies readonly (WireValue & { title: string })[];

export type OsImageName = (typeof osImageRows)[number]['name'];
export type OsImageWire = (typeof osImageRows)[number]['wire'];
export interface OsImageEntry {
  readonly name: OsImageName;
  /** The image UUID in zone `msk-avntg`: `bootDisk.sourceImageId` of a virtual machine. */
  readonly wire: OsImageWire;
  /** The spec's name of the OS. */
  readonly title: string;
}
export const OS_IMAGES: readonly OsImageEntry[] = frozen(osImageRows);
