// A check of an operation's variables, made once per operation of a cached document: the verdict graphql-js's
// `getVariableValues` gives (accepted or not) without its coerced copy, its paths or its error objects. The compiled
// forms of the run stage need only the verdict (graphql-jit coerces the variables itself, and graphql-js must accept
// them first: decision 087); any variables the check refuses go to graphql-js, which decides and words the errors
// (decision 099). Written from graphql-js 16's `coerceVariableValues` and `coerceInputValue`, rule for rule; re-check
// both on a graphql-js upgrade (test/execution/variables-check.test.ts compares the verdicts over every input type of
// the gateway's operations).
import {
  isInputObjectType,
  isInputType,
  isLeafType,
  isListType,
  isNonNullType,
  Kind,
  typeFromAST,
  TypeInfo,
  ValidationContext,
  type DocumentNode,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type VariableDefinitionNode,
} from 'graphql';

/** True only when graphql-js's getVariableValues would accept `inputs` for the operation the check was made for. */
export type VariablesCheck = (inputs: Readonly<Record<string, unknown>>) => boolean;

type Check = (value: unknown) => boolean;

const hasOwn = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);

/**
 * The check of `definitions` against `schema`, or null when an operation's variables are outside what it is written
 * for (a type that is not an input type, a oneOf input object): those go to graphql-js every time.
 */
export function variablesCheck(
  schema: GraphQLSchema,
  definitions: readonly VariableDefinitionNode[],
): VariablesCheck | null {
  const made = new Map<GraphQLInputType, Check>();
  const variables: Array<{ name: string; required: boolean; defaulted: boolean; check: Check }> = [];
  for (const definition of definitions) {
    const type = typeFromAST(schema, definition.type);
    if (!type || !isInputType(type)) return null;
    const check = typeCheck(type, made);
    if (!check) return null;
    variables.push({
      name: definition.variable.name.value,
      required: isNonNullType(type),
      defaulted: definition.defaultValue !== undefined,
      check,
    });
  }
  return (inputs) => {
    for (const v of variables) {
      // coerceVariableValues: an absent variable takes its default, or is refused when its type is non-null.
      if (!hasOwn(inputs, v.name)) {
        if (v.required && !v.defaulted) return false;
        continue;
      }
      if (!v.check(inputs[v.name])) return false;
    }
    return true;
  };
}

/** coerceInputValue's verdict for `type`, one function per type (a recursive input object refers to itself). */
function typeCheck(type: GraphQLInputType, made: Map<GraphQLInputType, Check>): Check | null {
  const known = made.get(type);
  if (known) return known;
  if (isNonNullType(type)) {
    const inner = typeCheck(type.ofType, made);
    if (!inner) return null;
    const check: Check = (value) => value != null && inner(value);
    made.set(type, check);
    return check;
  }
  if (isListType(type)) {
    // An item's check is made before the list's is known, which a list cannot be part of.
    const item = typeCheck(type.ofType as GraphQLInputType, made);
    if (!item) return null;
    const check: Check = (value) => {
      if (value == null) return true;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!item(value[i])) return false;
        return true;
      }
      // isIterableObject: any other iterable object is a list too; anything else is a list of one.
      if (
        typeof value === 'object' &&
        typeof (value as { [Symbol.iterator]?: unknown })[Symbol.iterator] === 'function'
      ) {
        for (const element of value as Iterable<unknown>) if (!item(element)) return false;
        return true;
      }
      return item(value);
    };
    made.set(type, check);
    return check;
  }
  if (isInputObjectType(type)) {
    if (type.isOneOf) return null;
    // Put in first, for an input object whose fields lead back to it.
    let own: Check = () => false;
    made.set(type, (value) => own(value));
    const definitions = type.getFields();
    const fields: Array<{ name: string; refused: boolean; check: Check }> = [];
    for (const field of Object.values(definitions)) {
      const check = typeCheck(field.type, made);
      if (!check) {
        made.delete(type);
        return null;
      }
      // A field left out takes its default, or is refused when its type is non-null.
      fields.push({ name: field.name, refused: field.defaultValue === undefined && isNonNullType(field.type), check });
    }
    own = (value) => {
      if (value == null) return true;
      if (typeof value !== 'object' || Array.isArray(value)) return false;
      const object = value as Record<string, unknown>;
      for (const f of fields) {
        const fieldValue = object[f.name];
        if (fieldValue === undefined) {
          if (f.refused) return false;
          continue;
        }
        if (!f.check(fieldValue)) return false;
      }
      // Every field given must be one of the type's.
      for (const name of Object.keys(object)) if (!definitions[name]) return false;
      return true;
    };
    return made.get(type)!;
  }
  if (isLeafType(type)) {
    // parseValue accepts a value when it neither throws nor answers undefined.
    const check: Check = (value) => {
      if (value == null) return true;
      try {
        return type.parseValue(value) !== undefined;
      } catch {
        return false;
      }
    };
    made.set(type, check);
    return check;
  }
  return null;
}

/** String.prototype.isWellFormed (ES2024: Node 20 has it, TypeScript's ES2023 library does not). */
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/**
 * Why a string or a number of the variables cannot be taken, or null. The NUL character (U+0000): PostgreSQL's text
 * cannot store it, so an input with it would fail after its upstream call, and no upstream's spec allows it. A lone
 * surrogate (`"\ud800"`): UTF-8 has none, so the upstream and the store would get U+FFFD, two values would be one, and
 * a read would differ from the answer. A number JSON cannot hold (`1e999` parses as Infinity): sent as null.
 */
function unsoundLeaf(value: unknown): string | null {
  if (typeof value === 'string') {
    if (value.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
    // O(1) for a one-byte string (V8 knows it holds no surrogate): nearly every value.
    return wellFormed(value) ? null : 'must be valid Unicode text (it holds a lone surrogate)';
  }
  if (typeof value === 'number' && !Number.isFinite(value)) return 'must be a number JSON can hold';
  return null;
}

/**
 * Where the variables hold a value no gateway value may hold (`unsoundLeaf`: the NUL character, a lone surrogate, in a
 * value or a name, or a number JSON cannot hold), as a path (`input.tags.2`) and why; null when they hold none.
 * Iterative: deep variables cannot overflow the stack.
 */
export function unsoundPath(variables: Readonly<Record<string, unknown>>): { path: string; reason: string } | null {
  // Nearly every request holds none: a scan without paths first (JSON text that parsed holds no cycle).
  if (!holdsUnsound(variables)) return null;
  const values: unknown[] = [variables];
  const paths: string[] = [''];
  while (values.length > 0) {
    const value = values.pop();
    const path = paths.pop()!;
    if (value !== null && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        const at = path === '' ? key : `${path}.${key}`;
        if (!Array.isArray(value) && !wellFormed(key))
          return { path: at, reason: 'must be named in valid Unicode text (its name holds a lone surrogate)' };
        values.push(child);
        paths.push(at);
      }
    } else {
      const reason = unsoundLeaf(value);
      if (reason !== null) return { path, reason };
    }
  }
  return null;
}

/** Whether any leaf or name of `value` is unsound (`unsoundLeaf`); iterative, no path made. */
function holdsUnsound(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (unsoundLeaf(v) !== null) return true;
    } else if (v !== null && typeof v === 'object') {
      if (Array.isArray(v)) {
        for (const child of v) if (typeof child !== 'boolean') stack.push(child);
      } else
        for (const key in v) {
          if (!wellFormed(key)) return true;
          const child = (v as Record<string, unknown>)[key];
          if (typeof child === 'number') {
            if (!Number.isFinite(child)) return true;
          } else if (typeof child === 'string' || typeof child === 'object') stack.push(child);
        }
    } else if (typeof v === 'number' && !Number.isFinite(v)) return true;
  }
  return false;
}

/** A variable that may be left out (it has a default) but not given as null: it is used where a value is required. */
export interface RequiredPlace {
  readonly variable: string;
  /** The type the place requires (`Outcome!`), for the refusal. */
  readonly type: string;
}

/**
 * The variables of `operation` (its fragments' included) that are nullable with a default and used where a value is
 * required: graphql-js's validation allows the place for the default's sake (VariablesInAllowedPositionRule), but a
 * null given for it is refused only in the run, at the field (`Argument "x" of non-null type "T!" must not be null`),
 * where it reads as the gateway's failure. Made once per operation of a cached document.
 */
export function requiredPlaces(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
): readonly RequiredPlace[] {
  const definitions = operation.variableDefinitions ?? [];
  if (!definitions.some((d) => d.type.kind !== Kind.NON_NULL_TYPE)) return [];
  const nullable = new Set(
    definitions.filter((d) => d.type.kind !== Kind.NON_NULL_TYPE).map((d) => d.variable.name.value),
  );
  const context = new ValidationContext(schema, document, new TypeInfo(schema), () => {});
  const places: RequiredPlace[] = [];
  for (const usage of context.getRecursiveVariableUsages(operation)) {
    const variable = usage.node.name.value;
    if (usage.type && isNonNullType(usage.type) && nullable.has(variable))
      places.push({ variable, type: String(usage.type) });
  }
  return places;
}

/** The first of `places` whose variable is given as null in `variables`, or null. */
export function nullWhereRequired(
  places: readonly RequiredPlace[],
  variables: Readonly<Record<string, unknown>>,
): RequiredPlace | null {
  for (const place of places) if (variables[place.variable] === null && hasOwn(variables, place.variable)) return place;
  return null;
}
