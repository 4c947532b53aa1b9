// GRAPHQL_VARIABLES_CHECK (decision 099): the variables check made once per operation gives graphql-js's verdict.
// For every argument of every root field of the gateway's schema (each creation's input among them), a valid value
// and every variation of it (each field, nested ones and list items included, left out or replaced by values of every
// JSON kind; an unknown field added; a value wrapped in a list or taken out of one) go to both, and the check must
// accept exactly what graphql-js's getVariableValues accepts.
import {
  buildSchema as buildSdl,
  getVariableValues,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  parse,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { describe, expect, it } from 'vitest';

import { variablesCheck } from '../../src/execution/variables.js';
import { buildSchema } from '../../src/graphql/schema.js';

const UUID = '3FA85F64-5717-4562-B3FC-2C963F66AFA6';
/** Values of every JSON kind, and strings that some scalar or enum of the schema takes. */
const KINDS: unknown[] = [
  null,
  true,
  false,
  0,
  1,
  -1,
  1.5,
  2 ** 53,
  '',
  'x',
  '12',
  ' 7 ',
  UUID,
  '2026-01-01T00:00:00Z',
  'MSK',
  'ALLOW',
  [],
  [null],
  [[]],
  [1, 'x'],
  {},
  [{}],
  { unknown: 1 },
];
const SCALAR_CANDIDATES: unknown[] = [UUID, 1, true, 1.5, '2026-01-01T00:00:00Z', 'x'];

/** A value graphql-js accepts for `type`: every field of an input object when `full`, else only the required ones. */
function sample(type: GraphQLInputType, full: boolean, depth = 0): unknown {
  if (isNonNullType(type)) return sample(type.ofType, full, depth);
  if (isListType(type)) return [sample(type.ofType as GraphQLInputType, full, depth)];
  if (isInputObjectType(type)) {
    const out: Record<string, unknown> = {};
    if (depth > 4) return out;
    for (const field of Object.values(type.getFields()))
      if (full || (isNonNullType(field.type) && field.defaultValue === undefined))
        out[field.name] = sample(field.type, full, depth + 1);
    return out;
  }
  if (isEnumType(type)) return type.getValues()[0]!.name;
  if (isScalarType(type))
    for (const candidate of SCALAR_CANDIDATES) {
      try {
        if (type.parseValue(candidate) !== undefined) return candidate;
      } catch {
        // the next candidate
      }
    }
  throw new Error(`no sample for ${String(type)}`);
}

/** `value` with the node at `path` replaced (`undefined`: left out of its object). */
function replaced(value: unknown, path: ReadonlyArray<string | number>, by: unknown): unknown {
  if (path.length === 0) return by;
  const [head, ...rest] = path;
  if (Array.isArray(value)) {
    const copy = [...value];
    copy[head as number] = replaced(value[head as number], rest, by);
    return copy;
  }
  const copy = { ...(value as Record<string, unknown>) };
  const next = replaced(copy[head as string], rest, by);
  if (next === undefined) delete copy[head as string];
  else copy[head as string] = next;
  return copy;
}

/** Every node of a JSON value with its path. */
function* nodes(value: unknown, path: Array<string | number> = []): Generator<[Array<string | number>, unknown]> {
  yield [path, value];
  if (Array.isArray(value)) for (let i = 0; i < value.length; i++) yield* nodes(value[i], [...path, i]);
  else if (value && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) yield* nodes(v, [...path, k]);
}

/** Every variation of one variable's value. */
function* variations(value: unknown): Generator<unknown> {
  for (const [path, node] of nodes(value)) {
    if (path.length > 0) yield replaced(value, path, undefined);
    for (const kind of KINDS) yield replaced(value, path, kind);
    yield replaced(value, path, [node]);
    if (Array.isArray(node)) yield replaced(value, path, node[0]);
    if (node && typeof node === 'object' && !Array.isArray(node))
      yield replaced(value, path, { ...(node as object), notAField: 1 });
  }
}

/** Checks every case; returns how many each verdict had. */
function compare(schema: GraphQLSchema, source: string, cases: Iterable<Record<string, unknown>>) {
  const operation = parse(source).definitions[0] as OperationDefinitionNode;
  const definitions = operation.variableDefinitions ?? [];
  const check = variablesCheck(schema, definitions);
  expect(check, source).not.toBeNull();
  const counts = { accepted: 0, refused: 0 };
  for (const inputs of cases) {
    const graphqlJs = getVariableValues(schema, definitions, inputs).errors === undefined;
    if (check!(inputs) !== graphqlJs)
      expect.fail(`${source}\n${JSON.stringify(inputs)}: graphql-js ${graphqlJs ? 'accepts' : 'refuses'}`);
    counts[graphqlJs ? 'accepted' : 'refused']++;
  }
  return counts;
}

describe("the variables check gives graphql-js's verdict", () => {
  const schema = buildSchema([]);

  it('over every argument of every root field of the gateway, each value varied in every field', () => {
    let total = { accepted: 0, refused: 0, operations: 0 };
    for (const root of [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]) {
      for (const field of Object.values(root?.getFields() ?? {})) {
        if (field.args.length === 0) continue;
        const kind =
          root === schema.getQueryType() ? 'query' : root === schema.getMutationType() ? 'mutation' : 'subscription';
        const source = `${kind}(${field.args.map((a) => `$${a.name}: ${String(a.type)}`).join(', ')}) { ${field.name}(${field.args
          .map((a) => `${a.name}: $${a.name}`)
          .join(', ')}) { __typename } }`;
        const cases: Array<Record<string, unknown>> = [{}];
        for (const full of [false, true]) {
          const valid = Object.fromEntries(field.args.map((a) => [a.name, sample(a.type, full)]));
          cases.push(valid);
          for (const arg of field.args) {
            const { [arg.name]: _left, ...without } = valid;
            cases.push(without);
            for (const value of variations(valid[arg.name])) cases.push({ ...valid, [arg.name]: value });
          }
        }
        const counts = compare(schema, source, cases);
        total = {
          accepted: total.accepted + counts.accepted,
          refused: total.refused + counts.refused,
          operations: total.operations + 1,
        };
        if (field.name === 'createNetwork' || field.name === 'createKafkaUser') {
          // Each creation's own input is covered both ways.
          expect(counts.accepted, field.name).toBeGreaterThan(20);
          expect(counts.refused, field.name).toBeGreaterThan(100);
        }
      }
    }
    expect(total.operations).toBeGreaterThan(20);
    expect(total.accepted).toBeGreaterThan(1000);
    expect(total.refused).toBeGreaterThan(1000);
    // decision 087's case: a list where an input object is expected, which graphql-jit's own coercion takes.
    const user = 'mutation($input: CreateKafkaUserInput!) { createKafkaUser(input: $input) { __typename } }';
    const definitions = (parse(user).definitions[0] as OperationDefinitionNode).variableDefinitions!;
    const input = { projectId: UUID, clusterId: UUID, name: 'u', password: 'p', acls: [[]] };
    expect(getVariableValues(schema, definitions, { input }).errors?.[0]?.message).toContain('to be an object');
    expect(variablesCheck(schema, definitions)!({ input })).toBe(false);
    expect(variablesCheck(schema, definitions)!({ input: { ...input, acls: [] } })).toBe(true);
  });

  it('over defaults, recursive input objects, lists of lists and variables with a default value', () => {
    const sdl = buildSdl(`
      input Node { name: String!, size: Int = 3, children: [Node!], tags: [[String!]] }
      enum Color { RED GREEN }
      type Query { f(node: Node, color: Color = RED, n: Int! = 1, ids: [ID!]!): Int }
    `);
    const source =
      'query($node: Node, $color: Color = RED, $n: Int! = 1, $ids: [ID!]!) { f(node: $node, color: $color, n: $n, ids: $ids) }';
    const valid = {
      node: { name: 'a', children: [{ name: 'b', tags: [['x'], []] }] },
      color: 'GREEN',
      n: 2,
      ids: ['1'],
    };
    const cases: Array<Record<string, unknown>> = [valid, {}, { ids: 1 }, { ids: [1, 2] }, { ids: null }];
    for (const name of Object.keys(valid) as Array<keyof typeof valid>) {
      const { [name]: _left, ...without } = valid;
      cases.push(without);
      for (const value of variations(valid[name])) cases.push({ ...valid, [name]: value });
    }
    const counts = compare(sdl, source, cases);
    expect(counts.accepted).toBeGreaterThan(20);
    expect(counts.refused).toBeGreaterThan(50);
  });

  it('leaves a oneOf input object to graphql-js', () => {
    const sdl = buildSdl(`input Pick @oneOf { a: Int, b: String } type Query { f(p: Pick): Int }`);
    const operation = parse('query($p: Pick) { f(p: $p) }').definitions[0] as OperationDefinitionNode;
    expect(variablesCheck(sdl, operation.variableDefinitions!)).toBeNull();
  });
});
