import { readFileSync } from 'node:fs';
import { makeExecutableSchema } from '@graphql-tools/schema';
// graphql 16 has no "exports": Vite resolves the bare specifier to index.mjs while Node (and so
// @graphql-tools/schema) loads index.js; the explicit path keeps both on one module instance.
import { graphql } from 'graphql/index.js';
import { describe, expect, it } from 'vitest';

import { catalogResolvers } from '../../src/graphql/catalog.js';

// Only the SDL this resolver map serves; the full server schema is the lead's HTTP-level test.
const typeDefs = ['common.graphql', 'catalog.graphql'].map((f) =>
  readFileSync(new URL(`../../schema/${f}`, import.meta.url), 'utf8'),
);
const schema = makeExecutableSchema({ typeDefs, resolvers: catalogResolvers });

async function run(source: string) {
  return graphql({ schema, source, contextValue: { requestId: 'test' } });
}

describe('the catalog query', () => {
  it('answers every field of every catalog type without errors', async () => {
    const result = await run(`{
      catalog {
        instanceTypes { name wireValue vcpu memoryMb memoryGb gpuCount platforms }
        kafkaInstanceTypes { name wireValue cpu ramGb }
        platforms { name wireValue cpu clockGhz gpu instanceTypes { name } }
        diskTypes { name wireValue minIops iopsPerGb bootable iops(sizeGb: 100) }
        images { name title imageId zone }
        kafkaVersions { name wireValue }
        cpuUtilizations { name wireValue percent }
        firewallActions { name wireValue }
        bootDiskIops(diskType: SSD_FAST, sizeGb: 1000)
      }
    }`);
    expect(result.errors).toBeUndefined();
    const catalog = (result.data as { catalog: Record<string, unknown[]> }).catalog;
    expect(catalog.instanceTypes).toHaveLength(42);
    expect(catalog.kafkaInstanceTypes).toHaveLength(29);
    expect(catalog.images).toHaveLength(9);
    expect(catalog.bootDiskIops).toBe(2000);
    expect(catalog.instanceTypes?.[0]).toEqual({
      name: 'C1_SMALL',
      wireValue: 'c1.small',
      vcpu: 1,
      memoryMb: 1024,
      memoryGb: 1,
      gpuCount: 0,
      platforms: ['COMPUTE_V2', 'COMPUTE_V3'],
    });
    expect(catalog.kafkaInstanceTypes?.[2]).toEqual({ name: 'C2_SMALL', wireValue: 'c2.small', cpu: 2, ramGb: 2 });
    expect(catalog.diskTypes).toContainEqual({
      name: 'SSD_ULTRA_PLUS',
      wireValue: 'ssd.ultra-plus',
      minIops: 5000,
      iopsPerGb: null,
      bootable: false,
      iops: null,
    });
    expect(catalog.diskTypes).toContainEqual({
      name: 'SSD_BASIC',
      wireValue: 'ssd.basic',
      minIops: 200,
      iopsPerGb: 0.4,
      bootable: true,
      iops: 200,
    });
    expect(catalog.images).toContainEqual({
      name: 'UBUNTU_22_04',
      title: 'Ubuntu 22.04 LTS Server',
      imageId: 'cd354813-aff7-423b-9d16-6820bce249f9',
      zone: 'msk-avntg',
    });
    expect(catalog.kafkaVersions).toEqual([
      { name: 'V2_8_1', wireValue: '2.8.1' },
      { name: 'V3_1_0', wireValue: '3.1.0' },
    ]);
    expect(catalog.cpuUtilizations).toContainEqual({ name: 'MEDIUM', wireValue: 'medium', percent: 50 });
    expect(catalog.firewallActions).toEqual([{ name: 'ALLOW', wireValue: 'allow' }]);
  });

  it('lists only the GPU types for compute.gpu.v1', async () => {
    const result = await run(`{
      catalog {
        instanceTypes(platform: COMPUTE_GPU_V1) { name vcpu memoryGb gpuCount }
        platforms { name gpu instanceTypes { name } }
      }
    }`);
    expect(result.errors).toBeUndefined();
    const { instanceTypes, platforms } = (
      result.data as {
        catalog: { instanceTypes: unknown[]; platforms: { name: string; gpu: boolean; instanceTypes: unknown[] }[] };
      }
    ).catalog;
    expect(instanceTypes).toEqual([
      { name: 'C32_G1_LARGE', vcpu: 32, memoryGb: 160, gpuCount: 1 },
      { name: 'C64_G2_LARGE', vcpu: 64, memoryGb: 320, gpuCount: 2 },
    ]);
    expect(platforms.map((p) => [p.name, p.gpu, p.instanceTypes.length])).toEqual([
      ['COMPUTE_V2', false, 40],
      ['COMPUTE_V3', false, 40],
      ['COMPUTE_GPU_V1', true, 2],
    ]);
  });

  it('lists only bootable disk types when asked', async () => {
    const result = await run(
      '{ catalog { boot: diskTypes(bootable: true) { name } kafkaOnly: diskTypes(bootable: false) { name } } }',
    );
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({
      catalog: {
        boot: [{ name: 'SSD_BASIC' }, { name: 'SSD_FAST' }, { name: 'SSD_ULTRA' }],
        kafkaOnly: [{ name: 'SSD_ULTRA_PLUS' }],
      },
    });
  });

  it('gives boot disk IOPS at the minimum and above it, and null for ssd.ultra-plus', async () => {
    const result = await run(`{
      catalog {
        atMin: bootDiskIops(diskType: SSD_ULTRA, sizeGb: 50)
        above: bootDiskIops(diskType: SSD_ULTRA, sizeGb: 250)
        ultraPlus: bootDiskIops(diskType: SSD_ULTRA_PLUS, sizeGb: 250)
      }
    }`);
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ catalog: { atMin: 1000, above: 2500, ultraPlus: null } });
  });

  it('rejects a disk size that is not positive with BAD_USER_INPUT naming sizeGb', async () => {
    const result = await run('{ catalog { bootDiskIops(diskType: SSD_FAST, sizeGb: 0) } }');
    expect(result.errors).toHaveLength(1);
    expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'sizeGb' });
    expect(result.data).toEqual({ catalog: { bootDiskIops: null } });
  });
});
