// Least privilege in the *admit* stage (docs/decisions/046): the SDL marks each entry point with the scopes an app
// needs (`@requiresScopes`, as Apollo's), and an operation that selects a field its app's grants do not cover is
// refused whole, before anything runs, on every transport. What an operation needs is worked out once per parsed
// operation (the prepare stage caches documents, so once per text); a request then compares a few sets.
import {
  getNamedType,
  GraphQLError,
  isCompositeType,
  isInterfaceType,
  isObjectType,
  Kind,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

import { isScope, type Grants, type Scope } from '../auth/caller.js';
import { ErrorCode } from '../errors.js';
import { requiredScopesOf } from '../graphql/schema.js';

/** A field's requirement: any one of `anyOf`, each of whose scopes the app must hold. */
export interface ScopeRequirement {
  /** `Type.field`, as the refusal names it. */
  readonly coordinate: string;
  readonly anyOf: readonly (readonly Scope[])[];
  /** The scopes asked, as one string: an operation keeps one requirement per distinct `anyOf`. */
  readonly key: string;
}

/** Every field of the schema that declares scopes, read once when the gateway starts (a wrong scope stops it). */
export function schemaRequirements(schema: GraphQLSchema): Map<GraphQLField<unknown, unknown>, ScopeRequirement> {
  const out = new Map<GraphQLField<unknown, unknown>, ScopeRequirement>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__') || !(isObjectType(type) || isInterfaceType(type))) continue;
    for (const field of Object.values(type.getFields())) {
      const coordinate = `${type.name}.${field.name}`;
      const anyOf = field.astNode ? requiredScopesOf(field.astNode) : null;
      if (!anyOf) continue;
      const unknown = anyOf.flat().find((s) => !isScope(s));
      if (unknown !== undefined)
        throw new Error(`@requiresScopes on ${coordinate} names an unknown scope ${JSON.stringify(unknown)}`);
      out.set(field as GraphQLField<unknown, unknown>, {
        coordinate,
        anyOf: anyOf as Scope[][],
        key: anyOf.map((all) => all.join(' ')).join(' | '),
      });
    }
  }
  return out;
}

/**
 * What one operation needs: the requirement of every field it selects, through fragments, in document order, one per
 * distinct set of scopes (the first field that asks it is the one a refusal names). A field under `@skip`/`@include`
 * counts: what an operation may touch is decided from its text, not from the variables of one request. Below the
 * root, the fields that lead from one cloud object to another (a parent, children, a plan's or a provisioning's step
 * `resource`) need `cloud:read`: what a payload leads to may have existed before the call, and may be another app's.
 */
function operationRequirements(
  schema: GraphQLSchema,
  declared: ReadonlyMap<GraphQLField<unknown, unknown>, ScopeRequirement>,
  document: DocumentNode,
  operation: OperationDefinitionNode,
): readonly ScopeRequirement[] {
  const root = schema.getRootType(operation.operation);
  if (!root || declared.size === 0) return [];
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const found = new Map<string, ScopeRequirement>();
  const spread = new Set<string>();
  const walk = (set: SelectionSetNode, parent: GraphQLCompositeType): void => {
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        if (!(isObjectType(parent) || isInterfaceType(parent))) continue; // a union selects only __typename
        const field = parent.getFields()[sel.name.value] as GraphQLField<unknown, unknown> | undefined;
        if (!field) continue; // __typename and the introspection fields
        const req = declared.get(field);
        if (req && !found.has(req.key)) found.set(req.key, req);
        const type = getNamedType(field.type);
        if (sel.selectionSet && isCompositeType(type)) walk(sel.selectionSet, type);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        const type = sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : parent;
        if (type && isCompositeType(type)) walk(sel.selectionSet, type);
      } else if (!spread.has(sel.name.value)) {
        spread.add(sel.name.value);
        const fragment = fragments.get(sel.name.value);
        const type = fragment && schema.getType(fragment.typeCondition.name.value);
        if (fragment && type && isCompositeType(type)) walk(fragment.selectionSet, type);
      }
    }
  };
  walk(operation.selectionSet, root);
  return [...found.values()];
}

/** Whether `grants` hold every scope of one of the requirement's sets: plain loops, no closure made per request. */
function meets(grants: Grants, req: ScopeRequirement): boolean {
  for (const all of req.anyOf) {
    let held = true;
    for (const scope of all)
      if (!grants.has(scope)) {
        held = false;
        break;
      }
    if (held) return true;
  }
  return false;
}

/**
 * The refusal of the first requirement `grants` does not meet, or null. `outcome` ends its message: what became of
 * the operation (a running subscription a reload ends says so).
 */
export function unmetRequirement(
  grants: Grants,
  requirements: readonly ScopeRequirement[],
  outcome = 'nothing was run',
): GraphQLError | null {
  for (const req of requirements) {
    if (meets(grants, req)) continue;
    const missing = req.anyOf[0]!.filter((s) => !grants.has(s));
    const alternatives =
      req.anyOf.length > 1
        ? ` (or one of: ${req.anyOf
            .slice(1)
            .map((all) => all.join(' + '))
            .join('; ')})`
        : '';
    return new GraphQLError(
      `${req.coordinate} needs the scope ${missing.join(' + ')}${alternatives}, which this app does not hold; ${outcome}`,
      {
        extensions: {
          code: ErrorCode.FORBIDDEN,
          field: req.coordinate,
          scope: missing[0],
          ...(req.anyOf.length > 1 ? { requiredScopes: req.anyOf } : {}),
        },
      },
    );
  }
  return null;
}

/**
 * The scope check of the admit stage: the refusal of an operation whose app lacks a scope, or null. What each
 * operation needs is kept beside its parsed node (weakly: it goes when the document cache lets the node go).
 */
export function scopeCheck(
  schema: GraphQLSchema,
): (
  grants: Grants,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  outcome?: string,
  lost?: (scope: Scope) => string | null,
) => GraphQLError | null {
  const declared = schemaRequirements(schema);
  const needs = new WeakMap<OperationDefinitionNode, readonly ScopeRequirement[]>();
  return (grants, document, operation, outcome, lost) => {
    let requirements = needs.get(operation);
    if (!requirements) {
      requirements = operationRequirements(schema, declared, document, operation);
      needs.set(operation, requirements);
    }
    if (requirements.length === 0) return null;
    return unmetRequirement(grants, requirements, outcome) ?? lostRequirement(requirements, lost, outcome);
  };
}

/**
 * The refusal of the first requirement naming a scope that `lost` says no longer counts as it did (a running
 * subscription admitted under it, which a reload took from its app or narrowed), or null. A field that any one of
 * several scopes opens shows what each of them covers: it still being open through another is not enough.
 */
function lostRequirement(
  requirements: readonly ScopeRequirement[],
  lost: ((scope: Scope) => string | null) | undefined,
  outcome = 'nothing was run',
): GraphQLError | null {
  if (!lost) return null;
  for (const req of requirements)
    for (const all of req.anyOf)
      for (const scope of all) {
        const why = lost(scope);
        if (why !== null)
          return new GraphQLError(`${req.coordinate} was admitted under the scope ${scope}: ${why}; ${outcome}`, {
            extensions: { code: ErrorCode.FORBIDDEN, field: req.coordinate, scope },
          });
      }
  return null;
}
