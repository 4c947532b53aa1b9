import {
  bootDiskIops,
  CPU_UTILIZATIONS,
  DISK_TYPES,
  FIREWALL_ACTIONS,
  INSTANCE_TYPES,
  instanceTypesForPlatform,
  KAFKA_INSTANCE_TYPES,
  KAFKA_VERSIONS,
  OS_IMAGE_ZONE,
  OS_IMAGES,
  PLATFORMS,
  type CatalogRoot,
  type DiskTypeName,
} from '../catalog/index.js';
import { badUserInput } from '../errors.js';
import type { Resolvers } from '../generated/graphql.js';

const CATALOG_ROOT: CatalogRoot = Object.freeze({});

// The generated resolver types want mutable arrays; the catalog's tables are frozen.
const list = <T>(rows: readonly T[]): T[] => [...rows];

function iops(diskType: DiskTypeName, sizeGb: number, field: string): number | null {
  if (sizeGb <= 0) throw badUserInput(field, `must be a positive number of gigabytes, got ${sizeGb}`);
  return bootDiskIops(diskType, sizeGb);
}

/** `Query.catalog` and the catalog's object types: a read-only view of src/catalog. */
export const catalogResolvers = {
  Query: {
    catalog: () => CATALOG_ROOT,
  },
  Catalog: {
    instanceTypes: (_root, { platform }) => list(platform ? instanceTypesForPlatform(platform) : INSTANCE_TYPES),
    kafkaInstanceTypes: () => list(KAFKA_INSTANCE_TYPES),
    platforms: () => list(PLATFORMS),
    diskTypes: (_root, { bootable }) =>
      bootable === undefined || bootable === null
        ? list(DISK_TYPES)
        : DISK_TYPES.filter((d) => d.bootable === bootable),
    images: () => list(OS_IMAGES),
    kafkaVersions: () => list(KAFKA_VERSIONS),
    cpuUtilizations: () => list(CPU_UTILIZATIONS),
    firewallActions: () => list(FIREWALL_ACTIONS),
    bootDiskIops: (_root, { diskType, sizeGb }) => iops(diskType, sizeGb, 'sizeGb'),
  },
  InstanceTypeInfo: {
    wireValue: (t) => t.wire,
    memoryGb: (t) => t.memoryMb / 1024,
    gpuCount: (t) => t.gpus,
  },
  KafkaInstanceTypeInfo: {
    wireValue: (t) => t.wire,
  },
  PlatformInfo: {
    wireValue: (p) => p.wire,
    instanceTypes: (p) => list(instanceTypesForPlatform(p.name)),
  },
  DiskTypeInfo: {
    wireValue: (d) => d.wire,
    iops: (d, { sizeGb }) => iops(d.name, sizeGb, 'sizeGb'),
  },
  OsImageInfo: {
    imageId: (image) => image.wire,
    zone: () => OS_IMAGE_ZONE,
  },
  KafkaVersionInfo: {
    wireValue: (v) => v.wire,
  },
  CpuUtilizationInfo: {
    wireValue: (c) => c.wire,
  },
  FirewallActionInfo: {
    wireValue: (a) => a.wire,
  },
} satisfies Resolvers;
