import {
  getDirectiveValues,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  Kind,
  valueFromASTUntyped,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

import type { Bucket } from './buckets.js';

export interface OperationCost {
  bucket: Bucket;
  points: number;
}

/**
 * Composite provisionings: they charge themselves, one creation point per upstream creation their plan will make
 * (a resume only for what is left), before their first step (src/provisioning/service.ts). Admission charges them
 * nothing, or a provisioning of 60 topics would cost one point for 64 creations.
 */
export const SELF_CHARGED_MUTATIONS: ReadonlySet<string> = new Set([
  'provisionKafkaCluster',
  'provisionVirtualMachine',
]);

/**
 * The variables as the run reads them: one left out takes its definition's default (`query($n: Int = 500)`), which is
 * what a directive's `if`, a list's size or its elements then come from, not the argument's default. The same object
 * when none is left out.
 */
export function withDefaults(
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | null | undefined,
): Record<string, unknown> | null | undefined {
  let filled: Record<string, unknown> | undefined;
  for (const def of operation.variableDefinitions ?? []) {
    const name = def.variable.name.value;
    if (!def.defaultValue || (variables && Object.hasOwn(variables, name))) continue;
    filled ??= { ...variables };
    filled[name] = valueFromASTUntyped(def.defaultValue);
  }
  return filled ?? variables;
}

/**
 * What an operation spends (docs/decisions/023). A creation is a top-level mutation field that calls an
 * upstream, which the contract marks by its `idempotencyKey` argument (docs/contract.md: every such mutation
 * takes one); each costs one creation point, aliases included (one per response key), except the
 * SELF_CHARGED_MUTATIONS. Any other operation (a query, a subscription, a mutation such as `ping`) costs one read
 * point.
 */
export function operationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | null | undefined,
): OperationCost {
  if (operation.operation !== 'mutation') return { bucket: 'reads', points: 1 };
  const fields = schema.getMutationType()?.getFields() ?? {};
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const vars = withDefaults(operation, variables) ?? {};
  // Read before the variables are coerced (and with none but the defaults when a tool is estimated at start-up): a
  // directive whose `if` they cannot give counts its selection as included, so the cost is an upper bound, and the run
  // refuses them.
  const directive = (d: typeof GraphQLSkipDirective, node: Parameters<typeof getDirectiveValues>[1]): unknown => {
    try {
      return getDirectiveValues(d, node, vars)?.if;
    } catch {
      return undefined;
    }
  };
  const included = (node: Parameters<typeof getDirectiveValues>[1]): boolean =>
    directive(GraphQLSkipDirective, node) !== true && directive(GraphQLIncludeDirective, node) !== false;

  let creations = 0;
  let selfCharged = 0;
  const seen = new Set<string>();
  // Fields of one response key are one field to graphql-js (validation makes them ask the same field with the same
  // arguments): it runs once, so it is charged once.
  const keys = new Set<string>();
  const walk = (set: SelectionSetNode): void => {
    for (const s of set.selections) {
      if (!included(s)) continue;
      if (s.kind === Kind.FIELD) {
        const key = s.alias?.value ?? s.name.value;
        if (keys.has(key)) continue;
        keys.add(key);
        if (SELF_CHARGED_MUTATIONS.has(s.name.value)) selfCharged += 1;
        else if (fields[s.name.value]?.args.some((a) => a.name === 'idempotencyKey')) creations += 1;
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        walk(s.selectionSet);
      } else {
        const f = fragments.get(s.name.value);
        // A fragment spread twice at the top level is one selection, as graphql-js collects it.
        if (f && !seen.has(f.name.value)) {
          seen.add(f.name.value);
          walk(f.selectionSet);
        }
      }
    }
  };
  walk(operation.selectionSet);
  if (creations > 0 || selfCharged > 0) return { bucket: 'creations', points: creations };
  return { bucket: 'reads', points: 1 };
}
