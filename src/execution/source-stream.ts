// A subscription's source event stream (graphql-js's `createSourceEventStream`), made from a plan kept per document
// and operation name (SUBSCRIPTION_COMPILED_SOURCE, docs/decisions/154): what graphql-js works out again on every
// subscribe from the document alone (the operation, its fragments, the root field and its definition) is worked out
// once, and each subscribe only coerces its variables, reads the field's arguments and calls the field's `subscribe`,
// with graphql-js's own answers and errors. Variables that are all built-in scalars or enums, and arguments that are
// each left out or given a variable (a mobile-ID subscription's), are read by the plan as graphql-js reads them when it
// accepts them; anything else, and every refusal, is graphql-js's own `getVariableValues` and `getArgumentValues`.
import {
  assertValidSchema,
  createSourceEventStream,
  defaultFieldResolver,
  getArgumentValues,
  getVariableValues,
  GraphQLError,
  isEnumType,
  isNonNullType,
  isSpecifiedScalarType,
  Kind,
  locatedError,
  typeFromAST,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLEnumType,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLResolveInfo,
  type GraphQLScalarType,
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
  /** The variables' coercion when every one is a built-in scalar or an enum, maybe non-null (else null). */
  readonly variables: readonly PlannedVariable[] | null;
  /** The field's arguments when each is left out or given a variable (else null: a literal, graphql-js reads it). */
  readonly arguments: readonly PlannedArgument[] | null;
}

/** A variable of a plan's operation whose type is a leaf: coerced by its type's `parseValue`, as graphql-js does. */
interface PlannedVariable {
  readonly name: string;
  readonly leaf: GraphQLScalarType | GraphQLEnumType;
  readonly nonNull: boolean;
  readonly hasDefault: boolean;
}

/** An argument of a plan's field: left out (`variable` null), or given the operation's variable `variable`. */
interface PlannedArgument {
  readonly name: string;
  readonly variable: string | null;
  readonly defaultValue: unknown;
  readonly nonNull: boolean;
}

const own = (o: object, key: string): boolean => Object.prototype.hasOwnProperty.call(o, key);

/** The variables of `operation` as PlannedVariables, or null when one is not a leaf type (graphql-js coerces those). */
function plannedVariables(schema: GraphQLSchema, operation: OperationDefinitionNode): PlannedVariable[] | null {
  const out: PlannedVariable[] = [];
  for (const node of operation.variableDefinitions ?? []) {
    const type = typeFromAST(schema, node.type);
    const nonNull = isNonNullType(type);
    const leaf: unknown = nonNull ? type.ofType : type;
    if (!(isEnumType(leaf) || (leaf instanceof Object && isSpecifiedScalarType(leaf as GraphQLScalarType))))
      return null;
    out.push({
      name: node.variable.name.value,
      leaf: leaf as GraphQLScalarType | GraphQLEnumType,
      nonNull,
      hasDefault: node.defaultValue !== undefined,
    });
  }
  return out;
}

/**
 * The arguments of the root `field` at `node`, or null when one is a literal, or the node's arguments are not all
 * distinct and known (graphql-js reads those).
 */
function plannedArguments(field: GraphQLField<unknown, unknown>, node: FieldNode): PlannedArgument[] | null {
  const given = new Map<string, string>();
  for (const arg of node.arguments ?? []) {
    if (arg.value.kind !== Kind.VARIABLE || given.has(arg.name.value)) return null;
    if (!field.args.some((d) => d.name === arg.name.value)) return null;
    given.set(arg.name.value, arg.value.name.value);
  }
  return field.args.map((d) => ({
    name: d.name,
    variable: given.get(d.name) ?? null,
    defaultValue: d.defaultValue,
    nonNull: isNonNullType(d.type),
  }));
}

/**
 * The coerced variables as graphql-js's `getVariableValues` gives them when it accepts them, or undefined when it may
 * not (a value missing, null or refused by its type: graphql-js then coerces them again and words the errors). Each
 * leaf is coerced by its type's `parseValue`, as `coerceInputValue` does; a refused one is asked again by graphql-js.
 */
function coercedByPlan(
  variables: readonly PlannedVariable[],
  inputs: Readonly<Record<string, unknown>>,
): Record<string, unknown> | undefined {
  const coerced: Record<string, unknown> = {};
  for (const v of variables) {
    if (!own(inputs, v.name)) {
      // A default is graphql-js's valueFromAST of its literal; a required one missing is an error.
      if (v.hasDefault || v.nonNull) return undefined;
      continue;
    }
    const value = inputs[v.name];
    if (value == null) {
      if (v.nonNull) return undefined;
      coerced[v.name] = null;
      continue;
    }
    let parsed: unknown;
    try {
      parsed = v.leaf.parseValue(value);
    } catch {
      return undefined;
    }
    if (parsed === undefined) return undefined;
    coerced[v.name] = parsed;
  }
  return coerced;
}

/**
 * The field's arguments as graphql-js's `getArgumentValues` gives them when it does not throw, or undefined when it
 * may (a required argument without a value: graphql-js then throws its own error).
 */
function argumentsByPlan(
  args: readonly PlannedArgument[],
  variables: Readonly<Record<string, unknown>>,
): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const a of args) {
    if (a.variable === null || !own(variables, a.variable)) {
      if (a.defaultValue !== undefined) out[a.name] = a.defaultValue;
      else if (a.nonNull) return undefined;
      continue;
    }
    const value = variables[a.variable];
    if (value === undefined || (value === null && a.nonNull)) return undefined;
    out[a.name] = value;
  }
  return out;
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
    variables: plannedVariables(schema, operation),
    arguments: plannedArguments(field, node),
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
  readonly stats = { planned: 0, graphqlJs: 0, leafVariables: 0 };

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
    const inputs = args.variableValues ?? {};
    let variableValues = plan.variables === null ? undefined : coercedByPlan(plan.variables, inputs);
    if (variableValues === undefined) {
      const coerced = getVariableValues(plan.schema, plan.operation.variableDefinitions ?? [], inputs, {
        maxErrors: args.options?.maxCoercionErrors ?? 50,
        hideSuggestions: args.hideSuggestions ?? false,
      });
      if (coerced.errors) return { errors: coerced.errors };
      variableValues = coerced.coerced;
    } else this.stats.leafVariables += 1;
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
      const fieldArgs =
        (plan.arguments === null ? undefined : argumentsByPlan(plan.arguments, variableValues)) ??
        getArgumentValues(field, fieldNodes[0]!, variableValues);
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
