import {
  buildASTSchema,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  isScalarType,
  isUnionType,
  parse,
} from 'graphql/index.js';
import { describe, expect, it } from 'vitest';

import { readTypeDefs } from '../../src/graphql/schema.js';

describe('the schema is its own manual', () => {
  it('describes every type, field, argument, input field and enum value', () => {
    const schema = buildASTSchema(parse(readTypeDefs().join('\n')));
    const missing: string[] = [];
    for (const type of Object.values(schema.getTypeMap())) {
      if (type.name.startsWith('__') || ['String', 'Int', 'Float', 'Boolean', 'ID'].includes(type.name)) continue;
      if (!type.description?.trim()) missing.push(type.name);
      if (isObjectType(type) || isInterfaceType(type)) {
        for (const field of Object.values(type.getFields())) {
          if (!field.description?.trim()) missing.push(`${type.name}.${field.name}`);
          for (const arg of field.args)
            if (!arg.description?.trim()) missing.push(`${type.name}.${field.name}(${arg.name})`);
        }
      } else if (isInputObjectType(type)) {
        for (const field of Object.values(type.getFields()))
          if (!field.description?.trim()) missing.push(`${type.name}.${field.name}`);
      } else if (isEnumType(type)) {
        for (const value of type.getValues())
          if (!value.description?.trim()) missing.push(`${type.name}.${value.name}`);
      } else if (!isUnionType(type) && !isScalarType(type)) {
        missing.push(`${(type as { name: string }).name} (unexpected kind)`);
      }
    }
    expect(missing).toEqual([]);
  });
});
