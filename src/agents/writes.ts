// What an operation does decides what an agent needs to run it (docs/decisions/060): its root fields, never a name a
// client chose (a variable, an alias, an operation or document name). Every mutation field that reaches an upstream
// needs an approval under MCP_MUTATIONS=approve and is planned by a dry run; a short, named list of harmless writes runs
// at once; any other mutation field (one added later, one for operators) is treated as needing an approval, and, having
// no dry run, is not offered.
import {
  Kind,
  print,
  visit,
  type ArgumentNode,
  type ASTNode,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { v5 as uuidv5 } from 'uuid';

/** Which approve scope a write needs: `cloud:approve` for a cloud creation, `identity:approve` for an identity check. */
export type WriteDomain = 'cloud' | 'identity';

/**
 * The mutation fields that reach an upstream, each with its dry run (src/agents/dry-run.ts): a creation spends money,
 * an identification or a verification checks a real person. All take an optional `idempotencyKey`.
 */
export const UPSTREAM_WRITES: Readonly<Record<string, WriteDomain>> = {
  createProject: 'cloud',
  createNetwork: 'cloud',
  createSubnet: 'cloud',
  createIpAddress: 'cloud',
  createKafkaCluster: 'cloud',
  createKafkaTopic: 'cloud',
  createKafkaUser: 'cloud',
  createVirtualMachine: 'cloud',
  provisionKafkaCluster: 'cloud',
  provisionVirtualMachine: 'cloud',
  createIdentification: 'identity',
  registerVerification: 'identity',
  checkRfm: 'identity',
};

/**
 * Writes that reach no upstream and spend nothing, run at once under MCP_MUTATIONS=approve. A notification token is a
 * random value whose hash the gateway stores, bounded per app; the mobile identity service is not called.
 */
export const HARMLESS_WRITES: ReadonlySet<string> = new Set(['issueMobileIdNotificationToken']);

export type OperationKind =
  /** A query. */
  | 'read'
  /** A mutation of harmless writes only. */
  | 'write'
  /** A mutation with a field that reaches an upstream (or that is not known to be harmless): it needs an approval. */
  | 'creation';

export interface Classified {
  readonly kind: OperationKind;
  /** The root fields' names, in the document's order. */
  readonly fields: readonly string[];
  /** Why the operation cannot be planned (null when it can, or when it is no creation). */
  readonly unplannable: string | null;
  /** The approve scopes' domains its writes need. */
  readonly domains: ReadonlySet<WriteDomain>;
  /** The variables the document passes as an upstream write's `idempotencyKey`: a plan fills them with its key. */
  readonly keyVariables: ReadonlySet<string>;
  /** Each key variable's write (its response key) and how many upstream writes there are: see `planKeys`. */
  readonly keyedWrites?: { readonly of: ReadonlyMap<string, string>; readonly writes: number };
}

/** The root fields of `operation`, or the reason they cannot be read statically (a fragment, a directive). */
function rootFields(operation: OperationDefinitionNode): FieldNode[] | string {
  const fields: FieldNode[] = [];
  for (const s of operation.selectionSet.selections) {
    if (s.kind !== Kind.FIELD) return 'a fragment among its root fields';
    if (s.directives?.length) return `a directive on its root field ${s.name.value}`;
    fields.push(s);
  }
  return fields;
}

export function classify(schema: GraphQLSchema, operation: OperationDefinitionNode): Classified {
  const root = rootFields(operation);
  const fields = typeof root === 'string' ? [] : root;
  const names = fields.map((f) => f.name.value);
  const none = { domains: new Set<WriteDomain>(), keyVariables: new Set<string>() };
  if (operation.operation !== 'mutation') return { kind: 'read', fields: names, unplannable: null, ...none };
  if (typeof root === 'string') return { kind: 'creation', fields: names, unplannable: root, ...none };
  if (names.every((n) => HARMLESS_WRITES.has(n))) return { kind: 'write', fields: names, unplannable: null, ...none };
  const domains = new Set<WriteDomain>();
  const keyVariables = new Set<string>();
  const of = new Map<string, string>();
  let writes = 0;
  let unplannable: string | null = null;
  const mutation = schema.getMutationType();
  // The writes by the key they are given (a variable's or a hard-coded one): two that share one could not both run,
  // the second replaying the first's outcome or refused, where the plan would show them both.
  const byKey = new Map<string, string[]>();
  // Two root fields under one response key are one field to GraphQL (merged, run once), two to a plan.
  const responseKeys = new Set<string>();
  for (const f of fields) {
    const name = f.name.value;
    const responseKey = (f.alias ?? f.name).value;
    if (responseKeys.has(responseKey))
      unplannable ??= `${responseKey} names two root fields, which GraphQL runs as one`;
    responseKeys.add(responseKey);
    if (HARMLESS_WRITES.has(name)) continue;
    const domain = UPSTREAM_WRITES[name];
    if (!domain || !mutation?.getFields()[name]?.args.some((a) => a.name === 'idempotencyKey')) {
      unplannable ??= `${name} has no dry run`;
      continue;
    }
    domains.add(domain);
    const key = f.arguments?.find((a) => a.name.value === 'idempotencyKey');
    const shared =
      key?.value.kind === Kind.VARIABLE
        ? `$${key.value.name.value}`
        : key?.value.kind === Kind.STRING
          ? JSON.stringify(key.value.value)
          : null;
    if (shared !== null) byKey.set(shared, [...(byKey.get(shared) ?? []), (f.alias ?? f.name).value]);
    if (key?.value.kind === Kind.VARIABLE && !of.has(key.value.name.value)) {
      keyVariables.add(key.value.name.value);
      of.set(key.value.name.value, (f.alias ?? f.name).value);
    }
  }
  for (const [key, sharing] of byKey)
    if (sharing.length > 1)
      unplannable ??= `${key} is the idempotencyKey of ${sharing.join(' and ')}, which need one each`;
  for (const f of fields) if (UPSTREAM_WRITES[f.name.value] !== undefined) writes++;
  return { kind: 'creation', fields: names, unplannable, domains, keyVariables, keyedWrites: { of, writes } };
}

/** The namespace of the keys a plan gives the upstream writes its document sends without one. */
const PLAN_KEY_NAMESPACE = '3f0b7a9e-3c1d-5e2a-9b8f-6d4c2a1e0f57';

/** The key a plan gives its write at `responseKey`: the plan id when it is the only one, else one derived from both. */
function planKey(planId: string, responseKey: string, writes: number): string {
  return writes === 1 ? planId : uuidv5(`${planId}\u0000${responseKey}`, PLAN_KEY_NAMESPACE);
}

/**
 * The values a plan gives the variables its writes take their `idempotencyKey` from: each write its own key, as
 * `keyedDocument` gives a write without one, so that two writes of one plan never share a key.
 */
export function planKeys(planId: string, classified: Pick<Classified, 'keyVariables' | 'keyedWrites'>) {
  const { of, writes } = classified.keyedWrites ?? { of: new Map<string, string>(), writes: 1 };
  return Object.fromEntries(
    [...classified.keyVariables].map((k) => [k, of.has(k) ? planKey(planId, of.get(k)!, writes) : planId]),
  );
}

/**
 * The document a plan runs: `operation` alone (with the fragments it uses), each upstream write that has no
 * `idempotencyKey` (or a null one) given one derived from the plan's id, so a plan runs exactly once however its
 * document was written. The only such write gets the plan id itself; several get one each, by response key.
 */
export function keyedDocument(document: DocumentNode, operation: OperationDefinitionNode, planId: string): string {
  const writes = operation.selectionSet.selections.filter(
    (s): s is FieldNode => s.kind === Kind.FIELD && UPSTREAM_WRITES[s.name.value] !== undefined,
  );
  const keyed = visit(operation, {
    Field: {
      enter(node, _key, _parent, path) {
        // Root fields only: the operation's selection set is at path ['selectionSet', 'selections', i].
        if (path.length !== 3 || !writes.includes(node)) return undefined;
        // A key written as null is none: the resolver would give each run a new random key, and a repeat would create.
        const given = node.arguments?.find((a) => a.name.value === 'idempotencyKey');
        if (given && given.value.kind !== Kind.NULL) return false;
        const key = planKey(planId, (node.alias ?? node.name).value, writes.length);
        const argument: ArgumentNode = {
          kind: Kind.ARGUMENT,
          name: { kind: Kind.NAME, value: 'idempotencyKey' },
          value: { kind: Kind.STRING, value: key },
        };
        const others = (node.arguments ?? []).filter((a) => a !== given);
        return { ...node, arguments: [...others, argument] };
      },
    },
  });
  // The fragments it uses, and theirs: another operation's fragment would fail validation as unused.
  const byName = new Map(
    document.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])),
  );
  const used: FragmentDefinitionNode[] = [];
  const seen = new Set<string>();
  const collect = (node: ASTNode) =>
    visit(node, {
      FragmentSpread(spread) {
        const f = byName.get(spread.name.value);
        if (!f || seen.has(f.name.value)) return;
        seen.add(f.name.value);
        used.push(f);
        collect(f);
      },
    });
  collect(keyed);
  return print({ kind: Kind.DOCUMENT, definitions: [keyed, ...used] });
}
