import {
  buildSchema,
  createSourceEventStream,
  GraphQLError,
  parse,
  type ExecutionArgs,
  type GraphQLFieldResolver,
  type GraphQLResolveInfo,
  type GraphQLSchema,
} from 'graphql';
import { describe, expect, it } from 'vitest';

import { SourceStreams } from '../../src/execution/source-stream.js';

// SUBSCRIPTION_COMPILED_SOURCE (docs/decisions/154): a subscription's source event stream made from its document's
// plan must be graphql-js's createSourceEventStream in every answer: the same stream handed back, the resolver called
// with the same arguments and the same info, the same variable errors, the same located resolver errors, and the same
// throw when the resolver gives no event stream. Each case runs both on one schema and compares what each gave.

const SDL = `
  type Query { ok: Boolean }
  enum Color { RED GREEN }
  input Range { from: Int!, to: Int! }
  type Event { id: String }
  type Subscription {
    events(key: String!, color: Color = RED, range: Range, limit: Int): Event
    plain(key: String): Event
  }
`;

/** An async iterable the resolver hands back: each call's own, so the two paths' answers can be told apart. */
function stream(): AsyncIterable<unknown> {
  return {
    [Symbol.asyncIterator]() {
      return { next: () => Promise.resolve({ done: true as const, value: undefined }) };
    },
  };
}

/**
 * What a resolver was called with, as plain data (object identities aside, which each path makes its own; each path
 * has a schema of its own, so the info's is only checked to be the schema subscribed on).
 */
function seen(root: unknown, args: unknown, context: unknown, info: GraphQLResolveInfo, schema: GraphQLSchema) {
  return {
    root,
    args,
    context,
    info: {
      fieldName: info.fieldName,
      fieldNodes: info.fieldNodes,
      returnType: String(info.returnType),
      parentType: info.parentType.name,
      path: info.path,
      ownSchema: info.schema === schema,
      fragments: { ...info.fragments },
      rootValue: info.rootValue,
      operation: info.operation,
      variableValues: info.variableValues,
    },
  };
}

/** A schema whose `events` subscribe does what `behave` says, recording each call. */
function setup(behave: (args: Record<string, unknown>) => unknown = () => stream()) {
  const schema = buildSchema(SDL);
  const calls: unknown[] = [];
  const field = schema.getSubscriptionType()!.getFields().events!;
  field.subscribe = ((root, args, context, info) => {
    calls.push(seen(root, args, context, info, schema));
    return behave(args as Record<string, unknown>);
  }) as GraphQLFieldResolver<unknown, unknown>;
  return { schema, calls, sources: new SourceStreams(schema) };
}

/** A source's answer as data: an event stream, errors (as on the wire, with their original messages), a throw. */
async function answer(made: () => unknown) {
  try {
    const source = await made();
    if (source && typeof source === 'object' && Symbol.asyncIterator in source) return { stream: true };
    const errors = (source as { errors: readonly GraphQLError[] }).errors;
    return {
      errors: errors.map((e) => ({ json: e.toJSON(), original: e.originalError?.message ?? null })),
    };
  } catch (err) {
    return { threw: err instanceof Error ? `${err.constructor.name}: ${err.message}` : String(err) };
  }
}

/** Both paths on `args` (each on a schema of its own, so that each resolver's calls are its path's alone). */
async function both(
  text: string,
  args: Partial<ExecutionArgs> = {},
  behave?: (args: Record<string, unknown>) => unknown,
) {
  const plain = setup(behave);
  const planned = setup(behave);
  const document = parse(text);
  const of = (schema: typeof plain.schema): ExecutionArgs => ({
    schema,
    document,
    contextValue: { app: 'a' },
    ...args,
  });
  const fromJs = await answer(() => createSourceEventStream(of(plain.schema)));
  const fromPlan = await answer(() => planned.sources.create(of(planned.schema)));
  return { fromJs, fromPlan, jsCalls: plain.calls, planCalls: planned.calls, stats: planned.sources.stats };
}

const EVENTS = `subscription On($key: String!, $color: Color, $range: Range) {
  events(key: $key, color: $color, range: $range) { id }
}`;

describe('a subscription source stream from its plan (SUBSCRIPTION_COMPILED_SOURCE)', () => {
  it('hands back the event stream, the resolver called with what graphql-js gives it', async () => {
    const r = await both(EVENTS, { variableValues: { key: 'k1', color: 'GREEN', range: { from: 1, to: 2 } } });
    expect(r.fromJs).toEqual({ stream: true });
    expect(r.fromPlan).toEqual(r.fromJs);
    expect(r.planCalls).toHaveLength(1);
    expect(r.planCalls).toEqual(r.jsCalls);
    expect(r.stats).toEqual({ planned: 1, graphqlJs: 0, leafVariables: 0 });
  });

  it('gives the defaults, literals, an alias and an operation picked by name as graphql-js does', async () => {
    const text = `subscription A { plain(key: "x") { id } }
      subscription B($limit: Int = 3) { renamed: events(key: "lit", limit: $limit) { id } }`;
    for (const variableValues of [undefined, null, {}, { limit: 7 }]) {
      const r = await both(text, { operationName: 'B', variableValues });
      expect(r.fromPlan).toEqual({ stream: true });
      expect(r.planCalls).toEqual(r.jsCalls);
      expect((r.planCalls[0] as { info: { path: { key: string } } }).info.path.key).toBe('renamed');
      expect(r.stats.planned).toBe(1);
    }
  });

  it('refuses bad variables with graphql-js errors, the resolver not called', async () => {
    const cases: Array<Partial<ExecutionArgs>> = [
      { variableValues: {} },
      { variableValues: { key: 5 } },
      { variableValues: { key: 'k', color: 'BLUE' } },
      { variableValues: { key: 'k', color: 'REDD' }, hideSuggestions: true },
      { variableValues: { key: 'k', range: { from: 'a' } } },
      { variableValues: { key: 1, color: 2, range: 3 }, options: { maxCoercionErrors: 2 } },
    ];
    for (const args of cases) {
      const r = await both(EVENTS, args);
      expect(r.fromJs).toHaveProperty('errors');
      expect(r.fromPlan).toEqual(r.fromJs);
      expect(r.planCalls).toEqual([]);
      expect(r.jsCalls).toEqual([]);
    }
  });

  it('locates what the resolver throws or returns as an error at its field, as graphql-js does', async () => {
    const behaviours: Array<(args: Record<string, unknown>) => unknown> = [
      () => {
        throw new GraphQLError('not yours', { extensions: { code: 'FORBIDDEN' } });
      },
      () => {
        throw new Error('the store is away');
      },
      () => new Error('returned, not thrown'),
      () => Promise.reject(new GraphQLError('later')),
      () => Promise.reject(new Error('the store is away, later')),
      () => Promise.resolve(new Error('returned later')),
      () => Promise.resolve(stream()),
      // A thenable that is not a Promise, as graphql-js's isPromise takes it.
      () => ({ then: (resolve: (v: unknown) => void) => resolve(stream()) }),
    ];
    for (const behave of behaviours) {
      const r = await both('subscription { aliased: events(key: "k") { id } }', {}, behave);
      expect(r.fromPlan).toEqual(r.fromJs);
      expect(r.planCalls).toEqual(r.jsCalls);
    }
  });

  it("throws graphql-js's error when the resolver gives no event stream", async () => {
    for (const value of [null, 42, { next: 1 }, 'text', Promise.resolve(42)]) {
      const r = await both('subscription { events(key: "k") { id } }', {}, () => value);
      expect(r.fromJs).toHaveProperty('threw');
      expect(r.fromPlan).toEqual(r.fromJs);
    }
  });

  it('leaves to graphql-js what its plan does not cover, with the same answers', async () => {
    const cases: Array<{ text: string; args?: Partial<ExecutionArgs> }> = [
      {
        text: 'subscription($on: Boolean!) { events(key: "k") @include(if: $on) { id } }',
        args: { variableValues: { on: true } },
      },
      {
        text: 'subscription($on: Boolean!) { events(key: "k") @include(if: $on) { id } }',
        args: { variableValues: { on: false } },
      },
      { text: 'subscription { ...F } fragment F on Subscription { events(key: "k") { id } }' },
      { text: 'subscription { ... on Subscription { events(key: "k") { id } } }' },
      { text: 'subscription A { events(key: "a") { id } } subscription B { events(key: "b") { id } }' },
      { text: 'subscription A { events(key: "a") { id } }', args: { operationName: 'Nope' } },
      { text: 'query { ok }' },
      { text: 'subscription { events(key: "k") { id } }', args: { rootValue: { from: 'root' } } },
      { text: EVENTS, args: { variableValues: 'key=k' as unknown as Record<string, unknown> } },
    ];
    for (const { text, args } of cases) {
      const r = await both(text, args);
      expect(r.fromPlan).toEqual(r.fromJs);
      expect(r.planCalls).toEqual(r.jsCalls);
      expect(r.stats).toEqual({ planned: 0, graphqlJs: 1, leafVariables: 0 });
    }
  });

  it("answers at once, not a turn later, when the field's subscribe gives its stream or error at once", () => {
    const document = parse('subscription { events(key: "k") { id } }');
    const streams = setup();
    const made = streams.sources.create({ schema: streams.schema, document, contextValue: {} });
    expect(made).not.toBeInstanceOf(Promise);
    expect(Symbol.asyncIterator in (made as object)).toBe(true);
    const failing = setup(() => new Error('no'));
    const refused = failing.sources.create({ schema: failing.schema, document });
    expect(refused).not.toBeInstanceOf(Promise);
    expect(refused).toHaveProperty('errors');
  });

  it('reads leaf variables and variable arguments as graphql-js does, and leaves every refusal to graphql-js', async () => {
    // Leaf variables (built-in scalars, an enum; required, nullable, with a default) bound to arguments, some left out.
    const text = `subscription Leaf($key: String!, $color: Color, $limit: Int = 5, $other: Int) {
      events(key: $key, color: $color, limit: $limit) { id }
    }`;
    const cases: [unknown, boolean][] = [
      [{ key: 'k' }, false], // $limit's default: graphql-js reads it
      [{ key: 'k', limit: 3 }, true],
      [{ key: 'k', limit: 3, color: 'GREEN' }, true],
      [{ key: 'k', limit: 3, color: null }, true],
      [{ key: 'k', limit: 3, color: undefined }, true],
      [{ key: 'k', limit: null }, true],
      [{ key: 'k', limit: 3, other: 9, extra: { a: 1 } }, true],
      [{ key: 'k', limit: '3' }, false],
      [{ key: 'k', limit: 2 ** 31 }, false],
      [{ key: 'k', limit: 1.5 }, false],
      [{ key: 'k', limit: 3, color: 'BLUE' }, false],
      [{ key: 'k', limit: 3, color: 1 }, false],
      [{ key: 7, limit: 3 }, false],
      [{ key: null, limit: 3 }, false],
      [{ key: undefined, limit: 3 }, false],
      [{ limit: 3 }, false],
      [{ key: { toString: () => 'k' }, limit: 3 }, false],
      [{ key: ['k'], limit: 3 }, false],
      [null, false],
      [{}, false],
    ];
    for (const [variableValues, byPlan] of cases) {
      const r = await both(text, { variableValues: variableValues as Record<string, unknown> | null });
      expect(r.fromPlan, JSON.stringify(variableValues)).toEqual(r.fromJs);
      expect(r.planCalls, JSON.stringify(variableValues)).toEqual(r.jsCalls);
      expect(r.stats, JSON.stringify(variableValues)).toEqual({
        planned: 1,
        graphqlJs: 0,
        leafVariables: byPlan ? 1 : 0,
      });
      if ('stream' in r.fromJs) {
        const [call] = r.planCalls as { args: object; info: { variableValues: object } }[];
        // Plain objects with graphql-js's keys in its order, not only equal values.
        expect(Object.getPrototypeOf(call!.args)).toBe(Object.prototype);
        expect(Object.keys(call!.args)).toEqual(Object.keys((r.jsCalls[0] as { args: object }).args));
        expect(Object.keys(call!.info.variableValues)).toEqual(
          Object.keys((r.jsCalls[0] as { info: { variableValues: object } }).info.variableValues),
        );
      }
    }
    // An argument given a literal, or a variable that is not a leaf: graphql-js reads them, with the same answers.
    const mixed = `subscription M($key: String!, $range: Range) { events(key: $key, range: $range, color: GREEN) { id } }`;
    for (const variableValues of [{ key: 'k' }, { key: 'k', range: { from: 1, to: 2 } }, { key: 'k', range: 3 }]) {
      const r = await both(mixed, { variableValues });
      expect(r.fromPlan).toEqual(r.fromJs);
      expect(r.planCalls).toEqual(r.jsCalls);
      expect(r.stats.leafVariables).toBe(0);
    }
  });

  it('makes a plan once per document and operation name', async () => {
    const { schema, sources, calls } = setup();
    const document = parse(EVENTS);
    for (let i = 0; i < 3; i++)
      await sources.create({ schema, document, variableValues: { key: `k${i}` }, operationName: 'On' });
    await sources.create({ schema, document, variableValues: { key: 'k' } });
    expect(sources.stats).toEqual({ planned: 4, graphqlJs: 0, leafVariables: 0 });
    expect(calls.map((c) => (c as { args: { key: string } }).args.key)).toEqual(['k0', 'k1', 'k2', 'k']);
  });
});
