import { isInputObjectType, isInterfaceType, isObjectType, parse, type ASTNode } from 'graphql';
import { describe, expect, it } from 'vitest';

import { buildSchema, readTypeDefs, requiredScopesOf } from '../../src/graphql/schema.js';

/** Every AST node the schema keeps for its types and their fields. */
function schemaNodes(): ASTNode[] {
  const nodes: ASTNode[] = [];
  for (const type of Object.values(buildSchema([]).getTypeMap())) {
    if (type.astNode) nodes.push(type.astNode);
    if (isObjectType(type) || isInterfaceType(type) || isInputObjectType(type))
      for (const field of Object.values(type.getFields())) if (field.astNode) nodes.push(field.astNode);
  }
  return nodes;
}

describe('the executable schema', () => {
  it('keeps the AST nodes its directives are read from, without locations (so without token lists)', () => {
    const nodes = schemaNodes();
    expect(nodes.length).toBeGreaterThan(100);
    expect(nodes.filter((n) => n.loc !== undefined)).toEqual([]);
    const scoped = nodes.filter((n) => n.kind === 'FieldDefinition' && requiredScopesOf(n) !== null);
    expect(scoped.length).toBeGreaterThan(0);
  });

  it('the check can fail: the same SDL parsed as graphql-js does by default has a location on every node', () => {
    const document = parse(readTypeDefs()[0]!);
    expect(document.definitions.every((d) => d.loc?.startToken !== undefined)).toBe(true);
  });
});
