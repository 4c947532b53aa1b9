import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  buildASTSchema,
  isEnumType,
  isObjectType,
  Kind,
  parse,
  type DocumentNode,
  type EnumValueDefinitionNode,
} from 'graphql';
import { describe, expect, it } from 'vitest';

import { CATALOG_ENUMS, enumNames, toWire, type CatalogEnum } from '../../src/catalog/index.js';

const schemaDir = fileURLToPath(new URL('../../schema/', import.meta.url));
const readSdl = (file: string): DocumentNode => parse(readFileSync(join(schemaDir, file), 'utf8'));
const sdlFiles = readdirSync(schemaDir).filter((f) => f.endsWith('.graphql'));

// Values of every enum definition and extension, across all SDL files, so an enum split or duplicated
// over two files is seen as such.
const sdlEnums = new Map<string, { files: string[]; values: EnumValueDefinitionNode[] }>();
for (const file of sdlFiles) {
  for (const def of readSdl(file).definitions) {
    if (def.kind !== Kind.ENUM_TYPE_DEFINITION && def.kind !== Kind.ENUM_TYPE_EXTENSION) continue;
    const seen = sdlEnums.get(def.name.value) ?? { files: [], values: [] };
    seen.files.push(file);
    seen.values.push(...(def.values ?? []));
    sdlEnums.set(def.name.value, seen);
  }
}

const catalogEnums = Object.keys(CATALOG_ENUMS) as CatalogEnum[];

const expectedCounts: Record<CatalogEnum, number> = {
  KafkaInstanceType: 29,
  InstanceType: 42,
  Platform: 3,
  DiskType: 4,
  KafkaVersion: 2,
  CpuUtilization: 3,
  FirewallAction: 1,
  OsImage: 9,
};

describe('the GraphQL enums offer exactly the values of the catalog', () => {
  it.each(catalogEnums)('%s is declared once, in schema/catalog.graphql', (name) => {
    expect(sdlEnums.get(name)?.files).toEqual(['catalog.graphql']);
  });

  it.each(catalogEnums)('%s has every catalog value and no other', (name) => {
    const sdl = (sdlEnums.get(name)?.values ?? []).map((v) => v.name.value);
    const catalog = enumNames(name);
    expect({ missingFromSdl: catalog.filter((v) => !sdl.includes(v)) }).toEqual({ missingFromSdl: [] });
    expect({ notInCatalog: sdl.filter((v) => !(catalog as readonly string[]).includes(v)) }).toEqual({
      notInCatalog: [],
    });
    expect(new Set(sdl).size).toBe(sdl.length);
  });

  it.each(catalogEnums)('%s has the number of values the spec lists', (name) => {
    expect(enumNames(name)).toHaveLength(expectedCounts[name]);
    expect(sdlEnums.get(name)?.values).toHaveLength(expectedCounts[name]);
  });

  it.each(catalogEnums)('each %s value documents the string sent upstream for it', (name) => {
    for (const value of sdlEnums.get(name)?.values ?? []) {
      const wire = toWire(name, value.name.value as never);
      expect(value.description?.value, `${name}.${value.name.value}`).toContain(`\`${wire}\``);
    }
  });
});

describe('the catalog part of the schema is a manual in GraphiQL', () => {
  const schema = buildASTSchema(
    {
      kind: Kind.DOCUMENT,
      definitions: [...readSdl('common.graphql').definitions, ...readSdl('catalog.graphql').definitions],
    },
    { assumeValidSDL: false },
  );
  const catalogTypeNames = readSdl('catalog.graphql').definitions.flatMap((def) =>
    'name' in def && def.name && def.kind !== Kind.OBJECT_TYPE_EXTENSION ? [def.name.value] : [],
  );

  it('declares the catalog types and enums', () => {
    expect(catalogTypeNames).toEqual(
      expect.arrayContaining(['Catalog', 'InstanceTypeInfo', 'DiskTypeInfo', 'OsImageInfo', ...catalogEnums]),
    );
    expect(schema.getQueryType()?.getFields().catalog?.type.toString()).toBe('Catalog!');
  });

  it('describes every type, field, argument and enum value it declares', () => {
    const undocumented: string[] = [];
    const check = (path: string, description: string | null | undefined) => {
      if (!description?.trim()) undocumented.push(path);
    };
    check('Query.catalog', schema.getQueryType()?.getFields().catalog?.description);
    for (const typeName of catalogTypeNames) {
      const type = schema.getType(typeName);
      check(typeName, type?.description);
      if (isObjectType(type)) {
        for (const field of Object.values(type.getFields())) {
          check(`${typeName}.${field.name}`, field.description);
          for (const arg of field.args) check(`${typeName}.${field.name}(${arg.name})`, arg.description);
        }
      }
      if (isEnumType(type)) {
        for (const value of type.getValues()) check(`${typeName}.${value.name}`, value.description);
      }
    }
    expect(undocumented).toEqual([]);
  });
});
