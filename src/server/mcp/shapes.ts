// GraphQL shapes as MCP needs them (docs/decisions/060): a tool's input schema from its operation's variables, its
// output schema from its selection, and the selection of a built-in tool from the schema. Worked out once, at start-up.
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  isUnionType,
  Kind,
  typeFromAST,
  type DocumentNode,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLOutputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

import { requiredScopesOf } from '../../graphql/schema.js';

export type JsonSchema = Record<string, unknown>;

/** The JSON Schema of a custom scalar, by name (the rest are strings). */
const SCALARS: Record<string, JsonSchema> = {
  String: { type: 'string' },
  ID: { type: 'string' },
  // GraphQL's Int is a signed 32-bit integer: a larger one is refused before anything runs.
  Int: { type: 'integer', minimum: -2147483648, maximum: 2147483647 },
  Float: { type: 'number' },
  Boolean: { type: 'boolean' },
  UUID: { type: 'string', format: 'uuid' },
  DateTime: { type: 'string', format: 'date-time' },
  DecimalString: { type: ['string', 'number'], description: 'A decimal number, as a number or a string of digits.' },
  JSON: {},
};

function described(schema: JsonSchema, description: string | null | undefined): JsonSchema {
  return description ? { ...schema, description } : schema;
}

function nullable(schema: JsonSchema): JsonSchema {
  // A nullable output value: the schema or null (JSON Schema's anyOf keeps descriptions and enums readable).
  return { anyOf: [schema, { type: 'null' }] };
}

/** The JSON Schema of a GraphQL input type (nullability is the caller's: `required` lists the non-null fields). */
export function inputJsonSchema(type: GraphQLInputType, seen: ReadonlySet<string> = new Set()): JsonSchema {
  if (isNonNullType(type)) return inputJsonSchema(type.ofType, seen);
  if (isListType(type)) return { type: 'array', items: inputJsonSchema(type.ofType, seen) };
  if (isEnumType(type))
    return described({ type: 'string', enum: type.getValues().map((v) => v.name) }, type.description);
  if (isScalarType(type)) return described({ ...(SCALARS[type.name] ?? { type: 'string' }) }, type.description);
  if (isInputObjectType(type)) {
    // An input type that contains itself is described once; deeper levels take any object.
    if (seen.has(type.name)) return { type: 'object' };
    const inner = new Set(seen).add(type.name);
    const properties: Record<string, JsonSchema> = {};
    const required: string[] = [];
    for (const field of Object.values(type.getFields())) {
      properties[field.name] = described(inputJsonSchema(field.type, inner), field.description);
      if (isNonNullType(field.type) && field.defaultValue === undefined) required.push(field.name);
    }
    return described(
      { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false },
      type.description,
    );
  }
  return {};
}

/** The input schema of an operation: one property per variable, described by the argument it feeds. */
export function variablesJsonSchema(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  argumentDescriptions: ReadonlyMap<string, string>,
): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const def of operation.variableDefinitions ?? []) {
    const name = def.variable.name.value;
    const type = typeFromAST(schema, def.type) as GraphQLInputType | undefined;
    if (!type) continue;
    properties[name] = described(inputJsonSchema(type), argumentDescriptions.get(name));
    if (isNonNullType(type) && !def.defaultValue) required.push(name);
  }
  return { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };
}

/** The JSON Schema of what a selection set returns, for `type`. */
function selectionJsonSchema(
  schema: GraphQLSchema,
  type: GraphQLOutputType,
  set: SelectionSetNode | undefined,
  document: DocumentNode,
): JsonSchema {
  if (isNonNullType(type)) return selectionJsonSchema(schema, type.ofType, set, document);
  const inner = (t: GraphQLOutputType): JsonSchema =>
    isNonNullType(t)
      ? selectionJsonSchema(schema, t.ofType, set, document)
      : nullable(selectionJsonSchema(schema, t, set, document));
  if (isListType(type)) return { type: 'array', items: inner(type.ofType) };
  if (isEnumType(type)) return { type: 'string', enum: type.getValues().map((v) => v.name) };
  if (isScalarType(type)) return { ...(SCALARS[type.name] ?? { type: 'string' }) };
  if (!set || !(isObjectType(type) || isInterfaceType(type))) return { type: 'object' };
  const properties: Record<string, JsonSchema> = {};
  for (const sel of set.selections) {
    if (sel.kind !== Kind.FIELD) continue; // fragments: their fields are optional, the object stays open
    const key = sel.alias?.value ?? sel.name.value;
    if (sel.name.value === '__typename') {
      properties[key] = { type: 'string' };
      continue;
    }
    const field = type.getFields()[sel.name.value];
    if (!field) continue;
    const value = isNonNullType(field.type)
      ? selectionJsonSchema(schema, field.type, sel.selectionSet, document)
      : nullable(selectionJsonSchema(schema, field.type, sel.selectionSet, document));
    properties[key] = described(value, field.description);
  }
  return { type: 'object', properties };
}

/** The output schema of an operation: its `data`, every root field possibly null (an error nulls it). */
export function resultJsonSchema(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
): JsonSchema {
  const root = schema.getRootType(operation.operation);
  if (!root) return { type: 'object' };
  const properties: Record<string, JsonSchema> = {};
  for (const sel of operation.selectionSet.selections) {
    if (sel.kind !== Kind.FIELD) continue;
    const field = root.getFields()[sel.name.value];
    if (!field) continue;
    properties[sel.alias?.value ?? sel.name.value] = described(
      nullable(selectionJsonSchema(schema, field.type, sel.selectionSet, document)),
      field.description,
    );
  }
  return { type: 'object', properties };
}

/** How deep a built-in tool's selection goes below its root field. */
const SELECTION_DEPTH = 3;

/**
 * The selection a built-in tool makes of its root field's type: every field that takes no required argument and asks
 * no scope beyond the root field's own (what leads from one cloud object to another needs `cloud:read`: a project's
 * resources come with `project`, not with a write tool), to SELECTION_DEPTH levels; a union's members by inline
 * fragments.
 */
export function defaultSelection(
  type: GraphQLOutputType,
  granted: ReadonlySet<string>,
  depth = 0,
  lists = isListType(isNonNullType(type) ? type.ofType : type) ? 1 : 0,
): string {
  const named = getNamedType(type) as GraphQLNamedType;
  if (isLeafType(named)) return '';
  if (isUnionType(named)) {
    const members = named.getTypes().map((t) => {
      const inner = fieldsOf(t.getFields(), granted, depth, lists);
      return inner ? `... on ${t.name} ${inner}` : '';
    });
    return `{ __typename ${members.filter(Boolean).join(' ')} }`;
  }
  if (isObjectType(named) || isInterfaceType(named)) return fieldsOf(named.getFields(), granted, depth, lists);
  return '';
}

/** `lists`: the lists already above; one list level in all keeps a tool's cost within the cost limit. */
function fieldsOf(
  fields: Record<string, GraphQLField<unknown, unknown>>,
  granted: ReadonlySet<string>,
  depth: number,
  lists: number,
): string {
  const parts: string[] = [];
  for (const field of Object.values(fields)) {
    if (field.args.some((a) => isNonNullType(a.type) && a.defaultValue === undefined)) continue;
    const asks = field.astNode ? requiredScopesOf(field.astNode) : null;
    if (asks && !asks.some((all) => all.every((s) => granted.has(s)))) continue;
    if (field.deprecationReason) continue;
    const named = getNamedType(field.type);
    if (isLeafType(named)) {
      parts.push(field.name);
      continue;
    }
    if (depth + 1 >= SELECTION_DEPTH) continue;
    const list = isListType(isNonNullType(field.type) ? field.type.ofType : field.type);
    if (list && lists >= 1) continue;
    const inner = defaultSelection(field.type, granted, depth + 1, lists + (list ? 1 : 0));
    if (inner) parts.push(`${field.name} ${inner}`);
  }
  return parts.length ? `{ ${parts.join(' ')} }` : '';
}
