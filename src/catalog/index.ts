import {
  CPU_UTILIZATIONS,
  DISK_TYPES,
  FIREWALL_ACTIONS,
  INSTANCE_TYPES,
  KAFKA_INSTANCE_TYPES,
  KAFKA_VERSIONS,
  OS_IMAGES,
  PLATFORMS,
  type DiskTypeName,
  type InstanceTypeEntry,
  type InstanceTypeName,
  type OsImageName,
  type OsImageWire,
  type PlatformName,
} from './data.js';

export * from './data.js';

/**
 * Every catalog enum, keyed by its GraphQL enum name. Each entry has `name` (the GraphQL value) and
 * `wire` (the cloud API's string).
 */
export const CATALOG_ENUMS = {
  KafkaInstanceType: KAFKA_INSTANCE_TYPES,
  InstanceType: INSTANCE_TYPES,
  Platform: PLATFORMS,
  DiskType: DISK_TYPES,
  KafkaVersion: KAFKA_VERSIONS,
  CpuUtilization: CPU_UTILIZATIONS,
  FirewallAction: FIREWALL_ACTIONS,
  OsImage: OS_IMAGES,
} as const;

export type CatalogEnum = keyof typeof CATALOG_ENUMS;
export type CatalogEnumEntry<E extends CatalogEnum> = (typeof CATALOG_ENUMS)[E][number];
export type CatalogEnumName<E extends CatalogEnum> = CatalogEnumEntry<E>['name'];
export type CatalogEnumWire<E extends CatalogEnum> = CatalogEnumEntry<E>['wire'];

interface Index {
  readonly byName: ReadonlyMap<string, { readonly name: string; readonly wire: string }>;
  readonly byWire: ReadonlyMap<string, { readonly name: string; readonly wire: string }>;
  readonly names: readonly string[];
  readonly wires: readonly string[];
}

const indexes = Object.fromEntries(
  Object.entries(CATALOG_ENUMS).map(([key, rows]): [string, Index] => [
    key,
    {
      byName: new Map(rows.map((row) => [row.name, row])),
      byWire: new Map(rows.map((row) => [row.wire, row])),
      names: Object.freeze(rows.map((row) => row.name)),
      wires: Object.freeze(rows.map((row) => row.wire)),
    },
  ]),
) as Record<CatalogEnum, Index>;

/** The catalog entry of an enum value, e.g. `catalogEntry('DiskType', 'SSD_FAST').minIops === 500`. */
export function catalogEntry<E extends CatalogEnum>(enumName: E, name: CatalogEnumName<E>): CatalogEnumEntry<E> {
  const entry = indexes[enumName].byName.get(name);
  if (!entry) throw new TypeError(`${name} is not a value of ${enumName}`);
  return entry as CatalogEnumEntry<E>;
}

/** The cloud API's string for an enum value: `toWire('KafkaInstanceType', 'C2_SMALL') === 'c2.small'`. */
export function toWire<E extends CatalogEnum>(enumName: E, name: CatalogEnumName<E>): CatalogEnumWire<E> {
  return catalogEntry(enumName, name).wire as CatalogEnumWire<E>;
}

/** The enum value of a cloud API string, or undefined when the catalog does not know it. */
export function fromWire<E extends CatalogEnum>(enumName: E, wire: string): CatalogEnumName<E> | undefined {
  return indexes[enumName].byWire.get(wire)?.name as CatalogEnumName<E> | undefined;
}

/** All values of an enum, in the spec's order. */
export function enumNames<E extends CatalogEnum>(enumName: E): readonly CatalogEnumName<E>[] {
  return indexes[enumName].names as readonly CatalogEnumName<E>[];
}

/** All cloud API strings of an enum, in the spec's order (for the wire schemas). */
export function enumWires<E extends CatalogEnum>(enumName: E): readonly CatalogEnumWire<E>[] {
  return indexes[enumName].wires as readonly CatalogEnumWire<E>[];
}

/** Narrows an untrusted string to a value of the enum. */
export function isEnumName<E extends CatalogEnum>(enumName: E, value: string): value is CatalogEnumName<E> {
  return indexes[enumName].byName.has(value);
}

/** The platforms whose `instance.platformId` accepts the instance type. */
export function platformsForInstanceType(type: InstanceTypeName): readonly PlatformName[] {
  return catalogEntry('InstanceType', type).platforms;
}

/** compute.v2/compute.v3 take the c<N>.<size> types; compute.gpu.v1 takes only the GPU types. */
export function isInstanceTypeValidForPlatform(type: InstanceTypeName, platform: PlatformName): boolean {
  return platformsForInstanceType(type).includes(platform);
}

/** The instance types a platform accepts, in the spec's order. */
export function instanceTypesForPlatform(platform: PlatformName): readonly InstanceTypeEntry[] {
  return INSTANCE_TYPES.filter((type) => type.platforms.includes(platform));
}

/** Whether the disk type is accepted as `bootDisk.diskType` (ssd.ultra-plus is not). */
export function isBootDiskType(diskType: DiskTypeName): boolean {
  return catalogEntry('DiskType', diskType).bootable;
}

/**
 * IOPS of a boot disk: max(min IOPS, IOPS per GB x size), rounded down; null when the type cannot be a
 * boot disk. Throws a RangeError unless `sizeGb` is a positive whole number of gigabytes.
 */
export function bootDiskIops(diskType: DiskTypeName, sizeGb: number): number | null {
  if (!Number.isSafeInteger(sizeGb) || sizeGb <= 0) {
    throw new RangeError(`sizeGb must be a positive whole number of gigabytes, got ${sizeGb}`);
  }
  const { minIops, iopsPerGb } = catalogEntry('DiskType', diskType);
  if (iopsPerGb === null) return null;
  // Whole thousandths: a float product can land a hair below a whole number (0.57 x 100 = 56.99999999999999).
  const perGbMilli = Math.round(iopsPerGb * 1000);
  return Math.max(minIops, Math.floor((perGbMilli * sizeGb) / 1000));
}

/** The image UUID sent as `bootDisk.sourceImageId` (zone `msk-avntg`). */
export function imageUuid(image: OsImageName): OsImageWire {
  return toWire('OsImage', image);
}

/** The parent value of the GraphQL `Catalog` type: the catalog is static, so it carries nothing. */
export type CatalogRoot = Readonly<Record<string, never>>;
