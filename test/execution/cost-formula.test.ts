// The cost formula (src/execution/cost-formula.ts) is a shortcut of the per-request walk with GraphQL Armor's rule
// (OperationLimits.walkCost, still what GRAPHQL_COST_FORMULA=false runs): for any document and any variables, both
// give the same verdict, to the word and the extension.
import fc from 'fast-check';
import {
  getNamedType,
  getNullableType,
  isCompositeType,
  isInterfaceType,
  isListType,
  isNullableType,
  isObjectType,
  parse,
  type GraphQLCompositeType,
  type GraphQLSchema,
} from 'graphql';
import { describe, expect, it } from 'vitest';

import type { GraphqlLimitsConfig } from '../../src/config/index.js';
import { OperationLimits } from '../../src/execution/limits.js';
import { PAGE_CAPS } from '../../src/graphql/pages.js';
import { buildSchema } from '../../src/graphql/schema.js';

const schema = buildSchema([]);

function limits(maxCost: number, listSizeEstimate: number, costFormula: boolean): OperationLimits {
  const config: GraphqlLimitsConfig = {
    maxAliases: 15,
    maxDepth: 6,
    maxTokens: 1000,
    maxDirectives: 50,
    maxCost,
    listSizeEstimate,
    maxBodyBytes: 102_400,
    costFormula,
  };
  return new OperationLimits(config, { introspection: true });
}

function verdict(l: OperationLimits, text: string, variables: Record<string, unknown> | null): unknown {
  const err = l.checkCost(schema, parse(text), variables);
  return err === undefined ? 'admitted' : { message: err.message, extensions: err.extensions };
}

/** A pseudo-random document over the schema: fields with their list and `first` arguments as literals or variables, fragments, introspection. */
function randomDocument(seed: number): { text: string; variables: string[] } {
  let state = seed >>> 0 || 1;
  const rnd = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const variables = new Set<string>();
  const variable = () => {
    const name = `v${Math.floor(rnd() * 4)}`;
    variables.add(name);
    return `$${name}`;
  };
  const literal = (listy: boolean): string => {
    if (listy)
      return `[${Array.from({ length: Math.floor(rnd() * 5) }, () => pick(['"a"', '1', variable(), '[1, 2]', '{ x: [1] }'])).join(', ')}]`;
    return pick([
      '0',
      '-3',
      '2',
      '7',
      '40',
      '2000',
      '1000000000000000000000000',
      'null',
      '"x"',
      '[1, 2, 3]',
      variable(),
    ]);
  };
  const fragments: string[] = [];
  const selection = (type: GraphQLCompositeType, depth: number): string => {
    const parts: string[] = [];
    const n = 1 + Math.floor(rnd() * 4);
    for (let i = 0; i < n; i++) {
      const r = rnd();
      if (r < 0.08) parts.push('__typename');
      else if (r < 0.14 && depth > 0) {
        const name = `F${fragments.length}`;
        fragments.push(''); // reserve the name: a fragment may spread itself, which both sides must weigh alike
        fragments[fragments.length - 1] =
          `fragment ${name} on ${type.name} { ${depth < 3 ? selection(type, depth + 1) : '__typename'} }`;
        parts.push(`...${name}`);
      } else if (r < 0.18)
        parts.push(`... on ${type.name} { ${depth < 3 ? selection(type, depth + 1) : '__typename'} }`);
      else if (r < 0.2 && depth === 0)
        parts.push(
          pick(['__type(name: "Project") { name fields { name args { name } } }', '__schema { types { name } }']),
        );
      else if (isObjectType(type) || isInterfaceType(type)) {
        const field = pick(Object.values(type.getFields()));
        const args = field.args
          .filter(() => rnd() < 0.7)
          .map(
            (a) =>
              `${a.name}: ${a.name === 'first' || a.name === 'last' || isListType(getNullableType(a.type)) ? literal(isListType(getNullableType(a.type)) && rnd() < 0.6) : isNullableType(a.type) ? 'null' : variable()}`,
          );
        if (rnd() < 0.1) args.push(`${pick(['first', 'last'])}: ${pick(['3', '0', variable()])}`);
        const named = getNamedType(field.type);
        const alias = rnd() < 0.2 ? `a${i}: ` : '';
        const dir = rnd() < 0.1 ? ` @skip(if: ${variable()})` : rnd() < 0.05 ? ' @include(if: true)' : '';
        const sub = isCompositeType(named) ? ` { ${depth < 4 ? selection(named, depth + 1) : '__typename'} }` : '';
        parts.push(`${alias}${field.name}${args.length ? `(${args.join(', ')})` : ''}${dir}${sub}`);
      } else parts.push('__typename');
    }
    return parts.join(' ');
  };
  const roots = [schema.getQueryType()!, schema.getMutationType()!, schema.getSubscriptionType()!];
  const operations = Array.from({ length: rnd() < 0.2 ? 2 : 1 }, (_, i) => {
    const root = pick(roots);
    const kind = root === roots[0] ? 'query' : root === roots[1] ? 'mutation' : 'subscription';
    return `${kind} Op${i} { ${selection(root, 0)} }`;
  });
  return { text: [...operations, ...fragments].join('\n'), variables: [...variables] };
}

const variableValue = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.integer({ min: -5, max: 60 }),
  fc.double({ min: -10, max: 1e6, noNaN: true }),
  fc.constantFrom(1e300, 2 ** 53 + 1, 0.5, '12', 'x', true),
  fc.array(fc.oneof(fc.integer(), fc.string(), fc.array(fc.integer(), { maxLength: 4 })), { maxLength: 12 }),
  fc.dictionary(
    fc.constantFrom('topics', 'users', 'ids', 'name'),
    fc.oneof(fc.array(fc.integer(), { maxLength: 30 }), fc.string()),
  ),
);

describe('the cost formula worked out once per document', () => {
  it('gives the walk’s verdict, word for word, for random documents, variables and limits', () => {
    const seen = { admitted: 0, refused: 0, byElements: 0 };
    fc.assert(
      fc.property(
        fc.integer({ min: 1 }),
        fc.dictionary(fc.constantFrom('v0', 'v1', 'v2', 'v3'), variableValue),
        fc.constantFrom(1, 6, 25, 120, 900, 5000),
        fc.constantFrom(1, 5, 37),
        (seed, vars, maxCost, estimate) => {
          const { text } = randomDocument(seed);
          const formula = verdict(limits(maxCost, estimate, true), text, vars);
          const walk = verdict(limits(maxCost, estimate, false), text, vars);
          expect(formula).toEqual(walk);
          if (formula === 'admitted') seen.admitted += 1;
          else if (JSON.stringify(formula).includes('one point each.')) seen.byElements += 1;
          else seen.refused += 1;
        },
      ),
      { numRuns: 1500 },
    );
    // The comparison meant something: both kinds of refusal and admissions were among the cases.
    expect(seen.admitted).toBeGreaterThan(100);
    expect(seen.refused).toBeGreaterThan(100);
    expect(seen.byElements).toBeGreaterThan(10);
  });

  it.each([
    [
      'the tree query',
      'query($id: ID!) { project(id: $id) { id name networks { id title subnets { id cidr } } } }',
      { id: 'p' },
    ],
    ['projects with a variable page size', 'query($n: Int) { projects(first: $n) { id networks { id } } }', { n: 400 }],
    ['projects with the page size absent', 'query($n: Int) { projects(first: $n) { id networks { id } } }', {}],
    [
      'verification results by ids',
      'query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }',
      { ids: Array.from({ length: 900 }, (_, i) => `v${i}`) },
    ],
    [
      'a list argument over the limit by itself',
      'query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }',
      { ids: Array.from({ length: 6000 }, (_, i) => `v${i}`) },
    ],
    [
      'a fragment used twice',
      'query { projects(first: 300) { ...P } a: projects(first: 2) { ...P } } fragment P on Project { id networks { id subnets { id } } }',
      null,
    ],
    ['introspection by __type', '{ __type(name: "Project") { fields { name args { name type { name } } } } }', null],
    ['projects with a literal first over its cap', '{ projects(first: 2000) { id networks { id } } }', null],
    [
      'capped lists with a variable first over their caps',
      'query($n: Int) { projects(first: $n) { id } mobileIdRejections(first: $n) { reason } }',
      { n: 1_000_000 },
    ],
    [
      'capped lists, one by a literal over its cap and one by a variable left out',
      'query($n: Int = 5000) { agentAudit(first: $n) { __typename } pendingAgentPlans(first: 3000) { id } }',
      {},
    ],
    ['a capped subscription list', 'subscription($n: Int) { pendingAgentPlansChanged(first: $n) { id } }', { n: 3000 }],
  ])('gives the walk’s verdict for %s at several limits', (_name, text, vars) => {
    for (const maxCost of [1, 50, 500, 5000, 100_000]) {
      expect(verdict(limits(maxCost, 5, true), text, vars)).toEqual(verdict(limits(maxCost, 5, false), text, vars));
    }
  });

  it('refuses as before: the limit, the cost found and the elements, in the message and the extensions', () => {
    const l = limits(5000, 5, true);
    expect(
      verdict(l, 'query($n: Int) { projects(first: $n) { id networks { id subnets { id } } } }', { n: 500 }),
    ).toEqual({
      message: 'Query Cost limit of 5000 exceeded, found 46500. (GRAPHQL_MAX_COST=5000)',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', limit: 'GRAPHQL_MAX_COST', max: 5000 },
    });
    expect(verdict(l, 'query($n: Int) { projects(first: $n) { id } }', { n: 10 })).toBe('admitted');
  });

  it('counts a list paged by first at the most rows its field returns, on both paths', () => {
    for (const costFormula of [true, false]) {
      const l = limits(1000, 5, costFormula);
      // projects returns at most 500 rows: 2000 or a million asked for cost 500 x 3 points, as 500 does.
      for (const [text, vars] of [
        ['{ projects(first: 2000) { id } }', null],
        ['query($n: Int) { projects(first: $n) { id } }', { n: 1_000_000 }],
      ] as const) {
        expect(verdict(l, text, vars)).toEqual({
          message: 'Query Cost limit of 1000 exceeded, found 1500. (GRAPHQL_MAX_COST=1000)',
          extensions: { code: 'GRAPHQL_VALIDATION_FAILED', limit: 'GRAPHQL_MAX_COST', max: 1000 },
        });
      }
      // agentAudit returns at most 1000: 5000 asked for is 1000 x (2 + 1).
      expect(verdict(l, '{ agentAudit(first: 5000) { __typename } }', null)).toMatchObject({
        message: 'Query Cost limit of 1000 exceeded, found 3000. (GRAPHQL_MAX_COST=1000)',
      });
      // Under its cap, first is the size, as before.
      expect(verdict(l, '{ projects(first: 333) { id } }', null)).toBe('admitted');
      expect(verdict(l, '{ projects(first: 334) { id } }', null)).toMatchObject({ message: /found 1002\./ });
    }
  });

  it('knows the cap of every list field paged by first, the one its resolver clamps to', () => {
    const paged: string[] = [];
    for (const type of Object.values(schema.getTypeMap())) {
      if (!isObjectType(type) || type.name.startsWith('__')) continue;
      for (const field of Object.values(type.getFields())) {
        if (!isListType(getNullableType(field.type)) || !field.args.some((a) => a.name === 'first')) continue;
        paged.push(`${type.name}.${field.name}`);
        expect(field.extensions.maxPageSize, `${type.name}.${field.name}`).toBe(
          (PAGE_CAPS as Record<string, Record<string, number>>)[type.name]?.[field.name],
        );
        expect(field.extensions.maxPageSize, `${type.name}.${field.name}`).toBeGreaterThan(0);
      }
    }
    expect(paged).toEqual(expect.arrayContaining(['Query.projects', 'Query.mobileIdRejections', 'Query.agentAudit']));
  });
});
