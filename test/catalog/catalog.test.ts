import { describe, expect, it } from 'vitest';

import {
  bootDiskIops,
  CATALOG_ENUMS,
  catalogEntry,
  DISK_TYPES,
  enumNames,
  enumWires,
  fromWire,
  imageUuid,
  INSTANCE_TYPES,
  instanceTypesForPlatform,
  isBootDiskType,
  isEnumName,
  isInstanceTypeValidForPlatform,
  KAFKA_INSTANCE_TYPES,
  OS_IMAGE_ZONE,
  OS_IMAGES,
  PLATFORMS,
  platformsForInstanceType,
  toWire,
  type CatalogEnum,
} from '../../src/catalog/index.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('Kafka instance types', () => {
  it('are the 29 types of the spec: c1.medium to c24.large, without c1.small', () => {
    expect(KAFKA_INSTANCE_TYPES).toHaveLength(29);
    expect(fromWire('KafkaInstanceType', 'c1.small')).toBeUndefined();
    expect(KAFKA_INSTANCE_TYPES[0]).toEqual({ name: 'C1_MEDIUM', wire: 'c1.medium', cpu: 1, ramGb: 2 });
    expect(KAFKA_INSTANCE_TYPES.at(-1)).toEqual({ name: 'C24_LARGE', wire: 'c24.large', cpu: 24, ramGb: 96 });
  });

  it('carry the CPU count and RAM of the spec table', () => {
    expect(catalogEntry('KafkaInstanceType', 'C2_SMALL')).toMatchObject({ cpu: 2, ramGb: 2 });
    expect(catalogEntry('KafkaInstanceType', 'C6_LARGE')).toMatchObject({ cpu: 6, ramGb: 18 });
    expect(catalogEntry('KafkaInstanceType', 'C12_LARGE')).toMatchObject({ cpu: 12, ramGb: 48 });
    expect(catalogEntry('KafkaInstanceType', 'C20_MEDIUM')).toMatchObject({ cpu: 20, ramGb: 40 });
    for (const t of KAFKA_INSTANCE_TYPES) expect(t.wire).toBe(`c${t.cpu}.${t.wire.split('.')[1]}`);
  });
});

describe('virtual machine instance types and platforms', () => {
  it('compute.v2 and compute.v3 take the same 40 types, c1.small to c24.xlarge', () => {
    const v2 = instanceTypesForPlatform('COMPUTE_V2').map((t) => t.wire);
    const v3 = instanceTypesForPlatform('COMPUTE_V3').map((t) => t.wire);
    expect(v2).toHaveLength(40);
    expect(v3).toEqual(v2);
    expect(v2[0]).toBe('c1.small');
    expect(v2.at(-1)).toBe('c24.xlarge');
  });

  it('carry the vCPUs and memory in MB of the spec table', () => {
    expect(catalogEntry('InstanceType', 'C1_SMALL')).toMatchObject({ vcpu: 1, memoryMb: 1024, gpus: 0 });
    expect(catalogEntry('InstanceType', 'C6_XLARGE')).toMatchObject({ vcpu: 6, memoryMb: 49152 });
    expect(catalogEntry('InstanceType', 'C12_LARGE')).toMatchObject({ vcpu: 12, memoryMb: 49152 });
    expect(catalogEntry('InstanceType', 'C24_XLARGE')).toMatchObject({ vcpu: 24, memoryMb: 196608 });
  });

  it('the GPU types are valid only on compute.gpu.v1, which takes nothing else', () => {
    expect(catalogEntry('InstanceType', 'C32_G1_LARGE')).toEqual({
      name: 'C32_G1_LARGE',
      wire: 'c32.g1.large',
      vcpu: 32,
      memoryMb: 163840,
      gpus: 1,
      platforms: ['COMPUTE_GPU_V1'],
    });
    expect(catalogEntry('InstanceType', 'C64_G2_LARGE')).toMatchObject({ vcpu: 64, memoryMb: 327680, gpus: 2 });
    for (const gpuType of ['C32_G1_LARGE', 'C64_G2_LARGE'] as const) {
      expect(platformsForInstanceType(gpuType)).toEqual(['COMPUTE_GPU_V1']);
      expect(isInstanceTypeValidForPlatform(gpuType, 'COMPUTE_GPU_V1')).toBe(true);
      expect(isInstanceTypeValidForPlatform(gpuType, 'COMPUTE_V2')).toBe(false);
      expect(isInstanceTypeValidForPlatform(gpuType, 'COMPUTE_V3')).toBe(false);
    }
    expect(instanceTypesForPlatform('COMPUTE_GPU_V1').map((t) => t.name)).toEqual(['C32_G1_LARGE', 'C64_G2_LARGE']);
  });

  it('a CPU type is valid on compute.v2 and compute.v3 but not on compute.gpu.v1', () => {
    expect(platformsForInstanceType('C2_SMALL')).toEqual(['COMPUTE_V2', 'COMPUTE_V3']);
    expect(isInstanceTypeValidForPlatform('C2_SMALL', 'COMPUTE_V3')).toBe(true);
    expect(isInstanceTypeValidForPlatform('C2_SMALL', 'COMPUTE_GPU_V1')).toBe(false);
    expect(INSTANCE_TYPES.filter((t) => t.gpus === 0)).toHaveLength(40);
  });

  it('platforms carry the spec ids and CPU descriptions', () => {
    expect(PLATFORMS.map((p) => [p.name, p.wire, p.cpu])).toEqual([
      ['COMPUTE_V2', 'compute.v2', 'server CPU, 2.2 GHz'],
      ['COMPUTE_V3', 'compute.v3', 'server CPU, 2.6 GHz'],
      ['COMPUTE_GPU_V1', 'compute.gpu.v1', 'server CPU, 2.6 GHz, with GPU'],
    ]);
  });
});

describe('disk types and boot disk IOPS', () => {
  it('lists the four disk types with their minimum IOPS', () => {
    expect(DISK_TYPES.map((d) => [d.wire, d.minIops])).toEqual([
      ['ssd.basic', 200],
      ['ssd.fast', 500],
      ['ssd.ultra', 1000],
      ['ssd.ultra-plus', 5000],
    ]);
  });

  it('a small boot disk gets the minimum IOPS of its type', () => {
    expect(bootDiskIops('SSD_BASIC', 10)).toBe(200);
    expect(bootDiskIops('SSD_BASIC', 500)).toBe(200); // 0.4 x 500 = 200, exactly the minimum
    expect(bootDiskIops('SSD_FAST', 100)).toBe(500);
    expect(bootDiskIops('SSD_ULTRA', 1)).toBe(1000);
  });

  it('a larger boot disk gets IOPS per GB x size, rounded down', () => {
    expect(bootDiskIops('SSD_BASIC', 1000)).toBe(400);
    expect(bootDiskIops('SSD_BASIC', 503)).toBe(201); // 201.2
    expect(bootDiskIops('SSD_BASIC', 504)).toBe(201); // 201.6
    expect(bootDiskIops('SSD_FAST', 251)).toBe(502);
    expect(bootDiskIops('SSD_ULTRA', 150)).toBe(1500);
  });

  it('ssd.ultra-plus is for Kafka disks only: not bootable, no boot IOPS', () => {
    expect(isBootDiskType('SSD_ULTRA_PLUS')).toBe(false);
    expect(catalogEntry('DiskType', 'SSD_ULTRA_PLUS').iopsPerGb).toBeNull();
    expect(bootDiskIops('SSD_ULTRA_PLUS', 100)).toBeNull();
    expect(DISK_TYPES.filter((d) => d.bootable).map((d) => d.wire)).toEqual(['ssd.basic', 'ssd.fast', 'ssd.ultra']);
  });

  it('refuses a size that is not a positive whole number of gigabytes', () => {
    expect(() => bootDiskIops('SSD_FAST', 0)).toThrow(RangeError);
    expect(() => bootDiskIops('SSD_FAST', -10)).toThrow(RangeError);
    expect(() => bootDiskIops('SSD_FAST', 10.5)).toThrow(RangeError);
    expect(() => bootDiskIops('SSD_ULTRA_PLUS', 0)).toThrow(RangeError);
  });
});

describe('OS images', () => {
  it('map each of the 9 images to its UUID in zone msk-avntg', () => {
    expect(OS_IMAGE_ZONE).toBe('msk-avntg');
    expect(OS_IMAGES).toHaveLength(9);
    expect(imageUuid('CENTOS_STREAM_9')).toBe('b251649e-e993-4957-be9c-b0c2c9976c40');
    expect(imageUuid('DEBIAN_11')).toBe('51d25ab7-7e48-455c-826d-9e66491580bd');
    expect(imageUuid('UBUNTU_22_04')).toBe('cd354813-aff7-423b-9d16-6820bce249f9');
    expect(catalogEntry('OsImage', 'UBUNTU_22_04').title).toBe('Ubuntu 22.04 LTS Server');
  });

  it('have distinct, well-formed UUIDs', () => {
    const uuids = OS_IMAGES.map((image) => imageUuid(image.name));
    for (const uuid of uuids) expect(uuid).toMatch(UUID);
    expect(new Set(uuids).size).toBe(9);
  });
});

describe('wire mapping', () => {
  it('translates enum values to the strings of the spec', () => {
    expect(toWire('KafkaInstanceType', 'C2_SMALL')).toBe('c2.small');
    expect(toWire('InstanceType', 'C32_G1_LARGE')).toBe('c32.g1.large');
    expect(toWire('Platform', 'COMPUTE_GPU_V1')).toBe('compute.gpu.v1');
    expect(toWire('DiskType', 'SSD_ULTRA_PLUS')).toBe('ssd.ultra-plus');
    expect(toWire('KafkaVersion', 'V3_1_0')).toBe('3.1.0');
    expect(toWire('CpuUtilization', 'MEDIUM')).toBe('medium');
    expect(toWire('FirewallAction', 'ALLOW')).toBe('allow');
    expect(toWire('OsImage', 'ROCKY_LINUX_8')).toBe('a1f7390d-145a-451e-aed2-7fb4199a5cc8');
    expect(catalogEntry('CpuUtilization', 'LOW').percent).toBe(20);
    expect(catalogEntry('CpuUtilization', 'HIGH').percent).toBe(100);
  });

  it.each(Object.keys(CATALOG_ENUMS) as CatalogEnum[])('%s round-trips every value through its wire string', (e) => {
    const names = enumNames(e);
    expect(names.map((name) => fromWire(e, toWire(e, name as never)))).toEqual(names);
    expect(enumWires(e)).toEqual(names.map((name) => toWire(e, name as never)));
    expect(new Set(enumWires(e)).size).toBe(names.length);
  });

  it('does not know strings outside the spec', () => {
    expect(fromWire('DiskType', 'hdd.basic')).toBeUndefined();
    expect(fromWire('InstanceType', 'C2_SMALL')).toBeUndefined();
    expect(fromWire('InstanceType', 'c1.small')).toBe('C1_SMALL');
    expect(isEnumName('InstanceType', 'C1_SMALL')).toBe(true);
    expect(isEnumName('KafkaInstanceType', 'C1_SMALL')).toBe(false);
    // @ts-expect-error: c1.small is not a Kafka instance type
    expect(() => toWire('KafkaInstanceType', 'C1_SMALL')).toThrow(TypeError);
  });

  it('tables cannot be changed at run time', () => {
    expect(() => (KAFKA_INSTANCE_TYPES as unknown as unknown[]).push({})).toThrow(TypeError);
    expect(() => {
      (DISK_TYPES[0] as { minIops: number }).minIops = 1;
    }).toThrow(TypeError);
    expect(() => (catalogEntry('InstanceType', 'C2_SMALL').platforms as string[]).push('COMPUTE_GPU_V1')).toThrow(
      TypeError,
    );
    expect(() => (enumNames('OsImage') as string[]).pop()).toThrow(TypeError);
  });
});
