// A subscription's source event stream (graphql-js's `createSourceEventStream`), made from a plan kept per document
// and operation name (SUBSCRIPTION_COMPILED_SOURCE, docs/decisions/154): what graphql-js works out again on every
// subscribe from the document alone (the operation, its fragments, the root field and its definition) is worked out
// once, and each subscribe only coerces its variables, reads the field's arguments and calls the field's `subscribe`,
// with graphql-js's own functions, answers and errors.
import {
  assertValidSchema,
  createSourceEventStream,
  defaultFieldResolver,
  getArgumentValues,
  getVariableValues,
  GraphQLError,
  Kind,
  locatedError,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { inspect } from 'graphql/jsutils/inspect.js';
import { isAsyncIterable } from 'graphql/jsutils/isAsyncIterable.js';
import { isPromise } from 'graphql/jsutils/isPromise.js';

type Source = AsyncIterable<unknown> | ExecutionResult;

/** What a subscribe of one document and operation name needs that depends on neither its variables nor its caller. */
interface Plan {
  readonly schema: GraphQLSchema;
  readonly operation: OperationDefinitionNode;
  /** graphql-js's map of the document's fragments (the resolver's `info.fragments`). */
  readonly fragments: Record<string, FragmentDefinitionNode>;
  readonly rootType: GraphQLObjectType;
  readonly field: GraphQLField<unknown, unknown>;
  readonly fieldNodes: readonly FieldNode[];
  /** The field's alias, or its name: the key of the result and of its errors' path. */
  readonly responseName: string;
}

/**
 * The plan of `operationName` in `document`, or null when graphql-js would answer in a way the plan does not
 * reproduce: no operation or an ambiguous one (its own error), not a subscription, a root selection that is not one
 * field without directives (`@skip`/`@include` read the variables; a fragment is collected by graphql-js), or a field
 * the schema does not have.
 */
function planOf(schema: GraphQLSchema, document: DocumentNode, operationName: string | null): Plan | null {
  // buildExecutionContext's own pick: the named operation, or the only one when no name is given.
  let operation: OperationDefinitionNode | undefined;
  const fragments: Record<string, FragmentDefinitionNode> = Object.create(null) as Record<
    string,
    FragmentDefinitionNode
  >;
  for (const definition of document.definitions) {
    if (definition.kind === Kind.OPERATION_DEFINITION) {
      if (operationName === null) {
        if (operation !== undefined) return null;
        operation = definition;
      } else if (definition.name?.value === operationName) operation = definition;
    } else if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
  }
  if (operation === undefined || operation.operation !== 'subscription') return null;
  const rootType = schema.getSubscriptionType();
  const selections = operation.selectionSet.selections;
  if (!rootType || selections.length !== 1) return null;
  const node = selections[0]!;
  if (node.kind !== Kind.FIELD || (node.directives?.length ?? 0) > 0) return null;
  const field = rootType.getFields()[node.name.value];
  if (!field) return null;
  return {
    schema,
    operation,
    fragments,
    rootType,
    field,
    fieldNodes: [node],
    responseName: node.alias?.value ?? node.name.value,
  };
}

/**
 * The source event streams of subscriptions, each from its document's plan (above), made the first time a document
 * and operation name subscribe; graphql-js's `createSourceEventStream` for what has no plan, and for arguments the
 * plan was not made for (another schema, a root value, variables that are not an object). The answer is graphql-js's
 * in every case: the same variable errors (its `getVariableValues`, with its limit of 50 and the same suggestions),
 * the same arguments (its `getArgumentValues`), the resolver called with the same four arguments, its error located
 * at the field, and the same error when it returns no event stream (test/execution/source-stream.test.ts compares
 * the two).
 */
export class SourceStreams {
  /** The plans per document and operation name (null: graphql-js answers that one). */
  private readonly plans = new WeakMap<DocumentNode, Map<string | null, Plan | null>>();

  /** The counts of subscribes made from a plan and by graphql-js: for tests. */
  readonly stats = { planned: 0, graphqlJs: 0 };

  constructor(private readonly schema: GraphQLSchema) {}

  create(args: ExecutionArgs): Source | Promise<Source> {
    const plan = this.planFor(args);
    if (plan === null) {
      this.stats.graphqlJs += 1;
      return createSourceEventStream(args);
    }
    this.stats.planned += 1;
    return this.fromPlan(plan, args);
  }

  private planFor(args: ExecutionArgs): Plan | null {
    const variables = args.variableValues;
    if (
      args.schema !== this.schema ||
      args.rootValue !== undefined ||
      (variables != null && typeof variables !== 'object')
    )
      return null;
    const name = args.operationName ?? null;
    let byName = this.plans.get(args.document);
    if (byName === undefined) {
      byName = new Map();
      this.plans.set(args.document, byName);
    }
    let plan = byName.get(name);
    if (plan === undefined) {
      plan = planOf(this.schema, args.document, name);
      byName.set(name, plan);
    }
    return plan;
  }

  /**
   * Not an async function: a field whose `subscribe` returns its stream at once (every one of the gateway's) gets its
   * source at once, where graphql-js's async `createSourceEventStream` answers a turn of the microtask queue later.
   */
  private fromPlan(plan: Plan, args: ExecutionArgs): Source | Promise<Source> {
    // assertValidExecutionArguments: a schema that does not validate throws, as graphql-js throws it.
    assertValidSchema(plan.schema);
    const coerced = getVariableValues(
      plan.schema,
      plan.operation.variableDefinitions ?? [],
      args.variableValues ?? {},
      {
        maxErrors: args.options?.maxCoercionErrors ?? 50,
        hideSuggestions: args.hideSuggestions ?? false,
      },
    );
    if (coerced.errors) return { errors: coerced.errors };
    const variableValues = coerced.coerced;
    const { field, fieldNodes, rootType, responseName } = plan;
    const info: GraphQLResolveInfo = {
      fieldName: field.name,
      fieldNodes,
      returnType: field.type,
      parentType: rootType,
      path: { prev: undefined, key: responseName, typename: rootType.name },
      schema: plan.schema,
      fragments: plan.fragments,
      rootValue: undefined,
      operation: plan.operation,
      variableValues,
    };
    let stream: unknown;
    try {
      const fieldArgs = getArgumentValues(field, fieldNodes[0]!, variableValues);
      const resolve = field.subscribe ?? args.subscribeFieldResolver ?? defaultFieldResolver;
      stream = resolve(undefined, fieldArgs, args.contextValue, info);
    } catch (error) {
      return located(error, plan);
    }
    if (isPromise(stream))
      return Promise.resolve(stream).then(
        (resolved) => eventStream(resolved, plan),
        (error: unknown) => located(error, plan),
      );
    return eventStream(stream, plan);
  }
}

/**
 * What the field's `subscribe` gave, as graphql-js answers it: an Error located at the field, an event stream as it
 * is, and anything else thrown (graphql-js throws what is not a GraphQLError).
 */
function eventStream(stream: unknown, plan: Plan): Source {
  if (stream instanceof Error) return located(stream, plan);
  if (!isAsyncIterable(stream))
    throw new Error(`Subscription field must return Async Iterable. Received: ${inspect(stream)}.`);
  return stream;
}

/** An error of the field's `subscribe` as graphql-js answers it: located at the field, the answer's only error. */
function located(error: unknown, plan: Plan): Source {
  return { errors: [locatedError(error, plan.fieldNodes, [plan.responseName])] };
}
