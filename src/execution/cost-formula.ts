// The cost of an operation as a formula worked out once per parsed document (docs/decisions/049): GraphQL Armor's
// cost (objects 2, scalars 1, each list multiplied by its size) plus one point per list element in the arguments.
// A list paged by `first` is as large as `first` asks, at most the field's cap: the most rows its resolver returns.
// What depends on a request is only where a list's size comes from a variable (`first: $n`, `externalIds: $ids`)
// and the elements of variables used in arguments; everything else is a number computed here. A request then
// evaluates the formula, O(its variables), with no walk of the document.
//
// The figures and the messages are those of the walk it replaces (OperationLimits.walkCost: Armor's rule over a
// copy of the document with `first: <size>` written in): the same sums in the same order, so the same numbers to
// the last digit, tested against it (test/execution/cost-formula.test.ts).
import {
  getNamedType,
  getNullableType,
  isCompositeType,
  isInterfaceType,
  isListType,
  isObjectType,
  Kind,
  SchemaMetaFieldDef,
  TypeMetaFieldDef,
  TypeNameMetaFieldDef,
  type ArgumentNode,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLArgument,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLSchema,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';

/** Armor's defaults, as the walk configures them (depthCostFactor 1: list sizes stand for depth, decision 013). */
const OBJECT_COST = 2;
const SCALAR_COST = 1;
/** listInputElements: nested values deeper than this are not counted. */
const MAX_VALUE_DEPTH = 64;

/**
 * A list's size read from a variable: `first: $n` (a number, else the argument's default, at most the field's cap) or
 * a list argument.
 */
interface VariableSize {
  readonly name: string;
  readonly kind: 'first' | 'list';
  readonly defaultValue: unknown;
  /** The most rows the field returns whatever `first` asks (its `maxPageSize`, src/graphql/pages.ts), else Infinity. */
  readonly cap: number;
}

/**
 * One selection's cost: a number known from the text, or a sum that needs the variables, evaluated as Armor adds:
 * `start`, plus each term left to right, times the multiplier.
 */
type Term = number | Sum;
interface Sum {
  readonly start: number;
  readonly terms: readonly Term[];
  /** The multiplier: known from the text, or read from a variable. */
  readonly size: number | VariableSize;
}

export interface CostFormula {
  readonly schema: GraphQLSchema;
  /** Each operation of the document, in order: Armor's rule checks every one of them. */
  readonly operations: readonly Term[];
  /** Elements of the literal lists in every argument of the document. */
  readonly literalElements: number;
  /** Variables used in arguments, each with its nesting depth there, whose elements count per request. */
  readonly variableElements: readonly { readonly name: string; readonly depth: number }[];
  readonly estimate: number;
}

/** Works out the formula of `document` (validated against `schema`). */
export function compileCostFormula(schema: GraphQLSchema, document: DocumentNode, estimate: number): CostFormula {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  // Armor keeps a fragment's cost from its first spread for every later one; it does not depend on where.
  const fragmentCosts = new Map<string, Term>();

  const sizeOf = (def: GraphQLField<unknown, unknown>, node: FieldNode): number | VariableSize => {
    const args = new Map((node.arguments ?? []).map((a) => [a.name.value, a.value]));
    const first = def.args.find((a) => a.name === 'first');
    if (first) {
      const given = args.get('first');
      const cap = def.extensions.maxPageSize ?? Infinity;
      if (given?.kind === Kind.VARIABLE)
        return { name: given.name.value, kind: 'first', defaultValue: first.defaultValue, cap };
      return firstSize(literalValue(given), first.defaultValue, estimate, cap);
    }
    const listArg = def.args.find((a: GraphQLArgument) => isListType(getNullableType(a.type)));
    if (listArg) {
      if (!args.has(listArg.name)) return listSize(listArg.defaultValue, estimate);
      const given = args.get(listArg.name)!;
      if (given.kind === Kind.VARIABLE)
        return { name: given.name.value, kind: 'list', defaultValue: undefined, cap: Infinity };
      return listSize(literalValue(given), estimate);
    }
    return estimate;
  };

  const selectionsCost = (
    start: number,
    set: SelectionSetNode,
    parent: GraphQLCompositeType | null,
    size: number | VariableSize,
  ): Term => {
    const terms: Term[] = [];
    for (const child of set.selections) terms.push(selectionCost(child, parent));
    if (typeof size === 'number' && terms.every((t) => typeof t === 'number')) {
      let cost = start;
      for (const t of terms) cost += t as number;
      return cost * size;
    }
    // Leading numbers fold into the start exactly as Armor would have added them; the rest waits for the request.
    let folded = start;
    let i = 0;
    while (i < terms.length && typeof terms[i] === 'number') folded += terms[i++] as number;
    return { start: folded, terms: terms.slice(i), size };
  };

  const selectionCost = (node: SelectionSetNode['selections'][number], parent: GraphQLCompositeType | null): Term => {
    if (node.kind === Kind.FIELD) {
      if (node.name.value === '__schema') return 0; // ignoreIntrospection
      if (!node.selectionSet) return SCALAR_COST;
      const def = fieldDef(schema, parent, node.name.value);
      const type = def ? compositeType(schema, getNamedType(def.type).name) : null;
      if (def && isListType(getNullableType(def.type)))
        return selectionsCost(OBJECT_COST, node.selectionSet, type, sizeOf(def, node));
      return selectionsCost(OBJECT_COST, node.selectionSet, type, literalMultiplier(node.arguments));
    }
    if (node.kind === Kind.INLINE_FRAGMENT) {
      const type = node.typeCondition ? compositeType(schema, node.typeCondition.name.value) : parent;
      return selectionsCost(OBJECT_COST, node.selectionSet, type, 1);
    }
    let cost = fragmentCosts.get(node.name.value);
    if (cost === undefined) {
      const fragment = fragments.get(node.name.value);
      // A validated document spreads only fragments it defines, and none of them in a cycle.
      if (!fragment) return SCALAR_COST;
      fragmentCosts.set(node.name.value, -1); // Armor's mark while a fragment is being costed
      cost = selectionsCost(
        OBJECT_COST,
        fragment.selectionSet,
        compositeType(schema, fragment.typeCondition.name.value),
        1,
      );
      fragmentCosts.set(node.name.value, cost);
    }
    return typeof cost === 'number' ? SCALAR_COST + cost : { start: SCALAR_COST, terms: [cost], size: 1 };
  };

  const operations: Term[] = [];
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    const root = schema.getRootType(d.operation) ?? null;
    operations.push(selectionsCost(0, d.selectionSet, root, 1));
  }

  let literalElements = 0;
  const variableElements: { name: string; depth: number }[] = [];
  const fromNode = (node: ValueNode, depth: number): void => {
    if (node.kind === Kind.VARIABLE) variableElements.push({ name: node.name.value, depth });
    else if (node.kind === Kind.LIST) {
      literalElements += node.values.length;
      for (const x of node.values) fromNode(x, depth + 1);
    } else if (node.kind === Kind.OBJECT) {
      for (const f of node.fields) fromNode(f.value, depth + 1);
    }
  };
  const arguments_ = (nodes: readonly ArgumentNode[] | undefined) => {
    for (const a of nodes ?? []) fromNode(a.value, 0);
  };
  // Every argument of the document, of fields and of directives, in every operation and fragment.
  const walkArguments = (set: SelectionSetNode | undefined): void => {
    for (const sel of set?.selections ?? []) {
      for (const d of sel.directives ?? []) arguments_(d.arguments);
      if (sel.kind === Kind.FIELD) arguments_(sel.arguments);
      if (sel.kind !== Kind.FRAGMENT_SPREAD) walkArguments(sel.selectionSet);
    }
  };
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION && d.kind !== Kind.FRAGMENT_DEFINITION) continue;
    for (const dir of d.directives ?? []) arguments_(dir.arguments);
    if (d.kind === Kind.OPERATION_DEFINITION)
      for (const v of d.variableDefinitions ?? []) for (const dir of v.directives ?? []) arguments_(dir.arguments);
    walkArguments(d.selectionSet);
  }
  return { schema, operations, literalElements, variableElements, estimate };
}

function compositeType(schema: GraphQLSchema, name: string): GraphQLCompositeType | null {
  const type = schema.getType(name);
  return type && isCompositeType(type) ? type : null;
}

/** The field `name` of `parent` as graphql-js's TypeInfo finds it, the introspection fields included. */
function fieldDef(
  schema: GraphQLSchema,
  parent: GraphQLCompositeType | null,
  name: string,
): GraphQLField<unknown, unknown> | undefined {
  if (!parent) return undefined;
  if (name === SchemaMetaFieldDef.name && schema.getQueryType() === parent) return SchemaMetaFieldDef;
  if (name === TypeMetaFieldDef.name && schema.getQueryType() === parent) return TypeMetaFieldDef;
  if (name === TypeNameMetaFieldDef.name) return TypeNameMetaFieldDef;
  return isObjectType(parent) || isInterfaceType(parent)
    ? (parent.getFields()[name] as GraphQLField<unknown, unknown> | undefined)
    : undefined;
}

/** What the walk read from a literal argument: an integer, a list's items, else nothing. */
function literalValue(node: ValueNode | undefined): unknown {
  if (node?.kind === Kind.INT) return Number(node.value);
  if (node?.kind === Kind.LIST) return node.values;
  return undefined;
}

/** Armor's multiplier of a field that is not a list: its first `first` or `last` argument, when an integer literal. */
function literalMultiplier(args: readonly ArgumentNode[] | undefined): number {
  for (const arg of args ?? []) {
    if (arg.name.value === 'first' || arg.name.value === 'last')
      return arg.value.kind === Kind.INT ? armorMultiplier(arg.value.value) : 1;
  }
  return 1;
}

/** Armor reads the size back from the text of an IntValue: `parseInt`, at least 1. */
function armorMultiplier(text: string): number {
  return Math.max(parseInt(text, 10), 1);
}

/** The rows `first` asks for, at most `cap`, the most the field returns: what the walk writes into its copy. */
function firstSize(given: unknown, defaultValue: unknown, estimate: number, cap: number): number {
  const v = given ?? defaultValue;
  const asked = typeof v === 'number' && Number.isFinite(v) ? Math.max(1, Math.floor(v)) : estimate;
  return armorMultiplier(String(Math.min(asked, cap)));
}

function listSize(v: unknown, estimate: number): number {
  return armorMultiplier(
    String(Array.isArray(v) ? Math.max(1, v.length) : v === undefined || v === null ? 1 : estimate),
  );
}

function multiplierOf(size: VariableSize, variables: Readonly<Record<string, unknown>>, estimate: number): number {
  const value = variables[size.name];
  return size.kind === 'first' ? firstSize(value, size.defaultValue, estimate, size.cap) : listSize(value, estimate);
}

function evaluate(term: Term, variables: Readonly<Record<string, unknown>>, estimate: number): number {
  if (typeof term === 'number') return term;
  let cost = term.start;
  for (const t of term.terms) cost += evaluate(t, variables, estimate);
  return cost * (typeof term.size === 'number' ? term.size : multiplierOf(term.size, variables, estimate));
}

/** The list elements of the request's arguments: the document's literal ones and those of its variables. */
export function listElements(formula: CostFormula, variables: Readonly<Record<string, unknown>>): number {
  let count = formula.literalElements;
  const fromValue = (v: unknown, depth: number): void => {
    if (depth > MAX_VALUE_DEPTH) return;
    if (Array.isArray(v)) {
      count += v.length;
      for (const x of v) fromValue(x, depth + 1);
    } else if (v !== null && typeof v === 'object') {
      for (const x of Object.values(v as Record<string, unknown>)) fromValue(x, depth + 1);
    }
  };
  for (const { name, depth } of formula.variableElements) fromValue(variables[name], depth);
  return count;
}

/** The cost of the first operation over `left`, in document order, or null when none is. */
export function overCost(
  formula: CostFormula,
  variables: Readonly<Record<string, unknown>>,
  left: number,
): number | null {
  for (const op of formula.operations) {
    const cost = evaluate(op, variables, formula.estimate);
    if (cost > left) return cost;
  }
  return null;
}

/** The refusal of an operation whose list arguments alone reach the limit. */
export function tooManyElements(max: number, count: number): string {
  return `Query Cost limit of ${max} exceeded: its list arguments hold ${count} elements, one point each.`;
}

/** The refusal of an operation over the limit that its list arguments leave (`left`), as Armor words it. */
export function costMessage(left: number, found: number, count: number): string {
  return `Query Cost limit of ${left} exceeded, found ${found}.${count ? ` Its list arguments hold ${count} more elements, one point each.` : ''}`;
}
