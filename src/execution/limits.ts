import { ApolloServerErrorCode } from '@apollo/server/errors';
import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { MaxTokensParserWLexer } from '@escape.tech/graphql-armor-max-tokens';
import {
  getNullableType,
  GraphQLError,
  isListType,
  Kind,
  NoSchemaIntrospectionCustomRule,
  TypeInfo,
  validate,
  visit,
  visitWithTypeInfo,
  type ArgumentNode,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionNode,
  type ValidationContext,
  type ValidationRule,
  type ValueNode,
} from 'graphql';
import { LRUCache } from 'lru-cache';

import type { GraphqlLimitsConfig } from '../config/index.js';
import { ErrorCode } from '../errors.js';
import {
  compileCostFormula,
  costMessage,
  listElements,
  overCost,
  tooManyElements,
  type CostFormula,
} from './cost-formula.js';

/** The variable that sets each limit: named in every refusal, so that an operator knows what to change. */
export const LIMIT_VARIABLES = {
  aliases: 'GRAPHQL_MAX_ALIASES',
  depth: 'GRAPHQL_MAX_DEPTH',
  tokens: 'GRAPHQL_MAX_TOKENS',
  directives: 'GRAPHQL_MAX_DIRECTIVES',
  cost: 'GRAPHQL_MAX_COST',
  bodyBytes: 'GRAPHQL_MAX_BODY_BYTES',
} as const;
export type LimitName = keyof typeof LIMIT_VARIABLES;

/**
 * A refused operation: a GraphQL error (code GRAPHQL_VALIDATION_FAILED; HTTP answers it 400, src/execution/present.ts
 * forHttp) whose message is GraphQL Armor's ("Aliases limit of 15 exceeded, found 200.") and whose extensions name
 * the limit and its value. The same error on every transport: an HTTP status is HTTP's to add.
 */
export function limitError(limit: LimitName, max: number, armorMessage: string): GraphQLError {
  const message = armorMessage.replace(/^Syntax Error: /, '');
  return new GraphQLError(`${message} (${LIMIT_VARIABLES[limit]}=${max})`, {
    extensions: { code: ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED, limit: LIMIT_VARIABLES[limit], max },
  });
}

/**
 * graphql-js's last error when it stops validating a document, by its words, and the gateway's for it. Past its own
 * work budget (the selections of one field name are compared pair by pair, fragments followed: some 800 selections of
 * `__typename` exhaust it) it says only "Validation aborted."; past 100 errors, that it reached its error limit.
 * Neither says what to do, and neither is a limit the gateway sets, so neither names a variable.
 */
const VALIDATION_STOPPED: ReadonlyMap<string, string> = new Map([
  [
    'Validation aborted.',
    'The document has too many fields to validate: graphql-js stopped at its work budget (the selections of one ' +
      'field name are compared pair by pair). Select each field once, or split the operation.',
  ],
  [
    'Too many validation errors, error limit reached. Validation aborted.',
    'The document has too many errors to validate: validation stopped after the first 100, above. Mend those and ' +
      'send it again.',
  ],
]);

/**
 * `errors` of graphql-js's validate, with its last one in the gateway's words when it is graphql-js's word that it
 * stopped (VALIDATION_STOPPED), coded as every refused document is; else `errors` itself. Only refused documents pay
 * for it, once per validation.
 */
export function namingValidationStop(errors: readonly GraphQLError[]): readonly GraphQLError[] {
  const last = errors[errors.length - 1];
  // graphql-js's own error: no node, no code (a rule's error with these words would have a node).
  const words = last && !last.nodes && last.extensions.code === undefined ? VALIDATION_STOPPED.get(last.message) : null;
  if (!words) return errors;
  const named = new GraphQLError(words, { extensions: { code: ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED } });
  return [...errors.slice(0, -1), named];
}

/**
 * The refusal of a request body (or SSE operation) over GRAPHQL_MAX_BODY_BYTES, as an answer's error: the same words
 * on every route that reads one, naming the variable and its value as every limit's refusal does.
 */
export function bodyTooLarge(max: number): { message: string; extensions: Record<string, unknown> } {
  return {
    message: `request body exceeds ${max} bytes (${LIMIT_VARIABLES.bodyBytes}=${max})`,
    extensions: { code: ErrorCode.BAD_REQUEST, limit: LIMIT_VARIABLES.bodyBytes, max },
  };
}

/**
 * A string literal holding the NUL character (U+0000) is refused, as variables holding it are
 * (src/execution/pipeline.ts): no gateway value may hold it (PostgreSQL's text cannot store it, and no upstream's spec
 * allows it).
 */
const noNulInStrings: ValidationRule = (ctx) => ({
  StringValue(node) {
    if (node.value.includes('\u0000'))
      ctx.reportError(new GraphQLError('A string must not contain the NUL character (U+0000)', { nodes: node }));
  },
});

/**
 * GRAPHQL_MAX_DIRECTIVES, counted as GraphQL Armor's maxDirectivesRule counts (every directive of the operation, a
 * fragment's each time it is spread) and worded as it words a refusal, but with the directives written on each spread:
 * Armor's rule drops those of a fragment's second and later spreads, so `...F @skip(if: false) @include(if: true)`
 * written 40 times (80 directives) passed a limit of 50 that the same written with inline fragments did not.
 */
function maxDirectives(max: number): ValidationRule {
  return (ctx) => {
    /** Directives within each fragment, worked out at its first spread; 0 while it is (a cycle validation refuses). */
    const inFragment = new Map<string, number>();
    const count = (node: OperationDefinitionNode | FragmentDefinitionNode | SelectionNode): number => {
      let n = node.directives?.length ?? 0;
      if (node.kind === Kind.FRAGMENT_SPREAD) {
        let inner = inFragment.get(node.name.value);
        if (inner === undefined) {
          inFragment.set(node.name.value, 0);
          const fragment = ctx.getFragment(node.name.value);
          inner = fragment ? count(fragment) : 0;
          inFragment.set(node.name.value, inner);
        }
        return n + inner;
      }
      for (const child of node.selectionSet?.selections ?? []) n += count(child);
      return n;
    };
    return {
      OperationDefinition(operation) {
        const found = count(operation);
        if (found > max)
          ctx.reportError(limitError('directives', max, `Directives limit of ${max} exceeded, found ${found}.`));
      },
    };
  };
}

/**
 * The abuse limits of GraphQL operations, shared by HTTP (Apollo plugin and validation rules) and WebSocket
 * (graphql-ws onSubscribe). The counting is GraphQL Armor's (the directives' as Armor's, mended: maxDirectives); this
 * module wires it and names the limits.
 *
 * - aliases, depth, directives: validation rules, run once per document text (Apollo caches validated documents);
 * - tokens: Armor's counting parser, before anything else parses the text (HTTP: the route, before Apollo);
 * - cost: GraphQL Armor's cost, with list sizes that depend on the variables (projects(first: $n),
 *   verificationResults(externalIds: $ids)). Worked out once per document as a formula (src/execution/cost-formula.ts);
 *   a request evaluates it with its variables, after the operation is resolved and before it executes.
 */
export class OperationLimits {
  readonly validationRules: readonly ValidationRule[];
  /** Texts that passed the token limit, so a repeated operation is not lexed twice: at most 1,000 and 4 MiB of text (LRU). */
  private readonly tokenChecked = new LRUCache<string, true>({
    max: 1000,
    maxSize: 4 * 1024 * 1024,
    sizeCalculation: (_v, k) => k.length || 1,
  });
  /** Cost formulas, one per parsed document, each going with its document (the DocumentCache's bound). */
  private readonly formulas = new WeakMap<DocumentNode, CostFormula>();
  /** walkCost's verdicts of documents whose list sizes do not depend on variables; each goes with its document. */
  private readonly costVerdicts = new WeakMap<DocumentNode, GraphQLError | null>();
  /** GRAPHQL_COST_FORMULA: false walks the document per request instead (the formula's reference). */
  private readonly costFormula: boolean;
  /** GRAPHQL_INTROSPECTION: off, errors also name no schema element the request did not name (no "Did you mean"). */
  readonly introspection: boolean;

  /**
   * `introspection: false` adds graphql-js's NoSchemaIntrospectionCustomRule to the rules: every transport validates
   * with these rules (Apollo's validationRules over HTTP, the document cache of WebSocket and SSE), so
   * GRAPHQL_INTROSPECTION holds on each of them from this one place.
   */
  constructor(
    readonly config: GraphqlLimitsConfig,
    options: { introspection: boolean } = { introspection: true },
  ) {
    this.costFormula = config.costFormula;
    this.introspection = options.introspection;
    const report = (limit: LimitName, max: number) => [
      (ctx: ValidationContext | null, error: GraphQLError) => ctx?.reportError(limitError(limit, max, error.message)),
    ];
    // propagateOnRejection: false makes Armor report instead of throw; the report names the limit.
    this.validationRules = [
      // allowList [] counts aliases of __typename too (Armor allows those by default): stricter, and one rule to explain.
      maxAliasesRule({
        n: config.maxAliases,
        allowList: [],
        exposeLimits: true,
        propagateOnRejection: false,
        onReject: report('aliases', config.maxAliases),
      }),
      maxDepthRule({
        n: config.maxDepth,
        exposeLimits: true,
        ignoreIntrospection: true,
        propagateOnRejection: false,
        onReject: report('depth', config.maxDepth),
      }),
      maxDirectives(config.maxDirectives),
      ...(options.introspection ? [] : [NoSchemaIntrospectionCustomRule]),
      noNulInStrings,
    ] as unknown as ValidationRule[];
  }

  /** Parses with Armor's token-counting parser; a document over the limit throws the limit error. */
  parse(source: string): DocumentNode {
    try {
      return new MaxTokensParserWLexer(source, { n: this.config.maxTokens, exposeLimits: true }).parseDocument();
    } catch (err) {
      if (err instanceof GraphQLError && /Token limit of \d+ exceeded/.test(err.message)) {
        throw limitError('tokens', this.config.maxTokens, err.message);
      }
      throw err;
    }
  }

  /**
   * The token limit alone, before Apollo parses the text itself (an error thrown from an Apollo hook before its parse
   * would be a 500, so the HTTP route calls this); syntax errors are left to that parse.
   */
  /** How many texts passed the token limit and are remembered (tests check what a request left behind). */
  get checkedTexts(): number {
    return this.tokenChecked.size;
  }

  checkTokens(source: string): GraphQLError | undefined {
    if (this.tokenChecked.has(source)) return undefined;
    try {
      this.parse(source);
    } catch (err) {
      if (err instanceof GraphQLError && err.extensions.limit === LIMIT_VARIABLES.tokens) return err;
    }
    this.tokenChecked.set(source, true);
    return undefined;
  }

  /**
   * The cost of the document with these variables, refused above GRAPHQL_MAX_COST; undefined when within.
   *
   * With `costFormula` (the default), the document is read once: its cost formula (src/execution/cost-formula.ts)
   * is kept beside its parsed node, and a request only reads the sizes of its variables' lists. Without it, every
   * request walks the document as below (`walkCost`): the reference the formula is tested against.
   */
  checkCost(
    schema: GraphQLSchema,
    document: DocumentNode,
    variables: Readonly<Record<string, unknown>> | null | undefined,
  ): GraphQLError | undefined {
    if (!this.costFormula) return this.walkCost(schema, document, variables);
    let formula = this.formulas.get(document);
    if (formula === undefined || formula.schema !== schema) {
      formula = compileCostFormula(schema, document, this.config.listSizeEstimate);
      this.formulas.set(document, formula);
    }
    const vars = variables ?? {};
    const max = this.config.maxCost;
    const count = listElements(formula, vars);
    const left = max - count;
    if (left < 1) return limitError('cost', max, tooManyElements(max, count));
    const found = overCost(formula, vars, left);
    return found === null ? undefined : limitError('cost', max, costMessage(left, found, count));
  }

  /** checkCost by walking the document with GraphQL Armor's rule, per request (GRAPHQL_COST_FORMULA=false). */
  walkCost(
    schema: GraphQLSchema,
    document: DocumentNode,
    variables: Readonly<Record<string, unknown>> | null | undefined,
  ): GraphQLError | undefined {
    const cached = this.costVerdicts.get(document);
    if (cached !== undefined) return cached ?? undefined;
    const { sized, usedVariables: sizedByVariables } = withListSizes(
      schema,
      document,
      variables ?? {},
      this.config.listSizeEstimate,
    );
    const inputs = listInputElements(document, variables ?? {});
    const usedVariables = sizedByVariables || inputs.usedVariables;
    const errors: GraphQLError[] = [];
    const max = this.config.maxCost;
    // Every element of a list in the arguments is work the resolvers do (a topic planned and created, an id looked
    // up): it counts one point, so a small selection over a huge list input is refused like a huge selection.
    const left = max - inputs.count;
    if (left < 1) {
      const verdict = limitError('cost', max, tooManyElements(max, inputs.count));
      if (!usedVariables) this.costVerdicts.set(document, verdict);
      return verdict;
    }
    validate(schema, sized, [
      costLimitRule({
        maxCost: left,
        // Lists are multiplied by their size here, which is what Armor's depth factor stands in for when it
        // cannot know list sizes: both together would count the same growth twice (decision 013).
        depthCostFactor: 1,
        exposeLimits: true,
        ignoreIntrospection: true,
        propagateOnRejection: false,
        onReject: [
          (_ctx: ValidationContext | null, error: GraphQLError) =>
            errors.push(
              limitError(
                'cost',
                max,
                inputs.count
                  ? `${error.message} Its list arguments hold ${inputs.count} more elements, one point each.`
                  : error.message,
              ),
            ),
        ],
      }) as unknown as ValidationRule,
    ]);
    const verdict = errors[0] ?? null;
    if (!usedVariables) this.costVerdicts.set(document, verdict);
    return verdict ?? undefined;
  }
}

/** How many list elements the document's arguments hold, variables and nested input objects included. */
export function listInputElements(
  document: DocumentNode,
  variables: Readonly<Record<string, unknown>>,
): { count: number; usedVariables: boolean } {
  let count = 0;
  let usedVariables = false;
  const fromValue = (v: unknown, depth: number): void => {
    if (depth > 64) return;
    if (Array.isArray(v)) {
      count += v.length;
      for (const x of v) fromValue(x, depth + 1);
    } else if (v !== null && typeof v === 'object') {
      for (const x of Object.values(v as Record<string, unknown>)) fromValue(x, depth + 1);
    }
  };
  const fromNode = (node: ValueNode, depth: number): void => {
    if (node.kind === Kind.VARIABLE) {
      usedVariables = true;
      fromValue(variables[node.name.value], depth);
    } else if (node.kind === Kind.LIST) {
      count += node.values.length;
      for (const x of node.values) fromNode(x, depth + 1);
    } else if (node.kind === Kind.OBJECT) {
      for (const f of node.fields) fromNode(f.value, depth + 1);
    }
  };
  visit(document, {
    Argument(node) {
      fromNode(node.value, 0);
    },
  });
  return { count, usedVariables };
}

/**
 * A copy of the document where every list field that selects objects carries `first: <size>`, the argument GraphQL
 * Armor's cost rule multiplies by. The size is the field's own `first` (literal, variable or default, at most the
 * field's cap: `maxPageSize` in its extensions), else the length of its list argument
 * (verificationResults(externalIds)), else GRAPHQL_LIST_SIZE_ESTIMATE.
 */
function withListSizes(
  schema: GraphQLSchema,
  document: DocumentNode,
  variables: Readonly<Record<string, unknown>>,
  estimate: number,
): { sized: DocumentNode; usedVariables: boolean } {
  const typeInfo = new TypeInfo(schema);
  let usedVariables = false;
  const valueOf = (node: ValueNode | undefined): unknown => {
    if (!node) return undefined;
    if (node.kind === Kind.VARIABLE) {
      usedVariables = true;
      return variables[node.name.value];
    }
    if (node.kind === Kind.INT) return Number(node.value);
    if (node.kind === Kind.LIST) return node.values;
    return undefined;
  };
  const sizeOf = (def: GraphQLField<unknown, unknown>, node: FieldNode): number => {
    const args = new Map((node.arguments ?? []).map((a) => [a.name.value, a.value]));
    const first = def.args.find((a) => a.name === 'first');
    if (first) {
      const given = args.has('first') ? valueOf(args.get('first')) : undefined;
      const v = given ?? first.defaultValue;
      const asked = typeof v === 'number' && Number.isFinite(v) ? Math.max(1, Math.floor(v)) : estimate;
      // The resolver returns at most the field's cap (src/graphql/pages.ts), whatever `first` asks.
      return Math.min(asked, def.extensions.maxPageSize ?? Infinity);
    }
    const listArg = def.args.find((a) => isListType(getNullableType(a.type)));
    if (listArg) {
      const v = args.has(listArg.name) ? valueOf(args.get(listArg.name)) : listArg.defaultValue;
      if (Array.isArray(v)) return Math.max(1, v.length);
      return v === undefined || v === null ? 1 : estimate;
    }
    return estimate;
  };
  const sized = visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Field(node) {
        if (!node.selectionSet) return undefined;
        const def = typeInfo.getFieldDef();
        if (!def || !isListType(getNullableType(def.type))) return undefined;
        const size: ArgumentNode = {
          kind: Kind.ARGUMENT,
          name: { kind: Kind.NAME, value: 'first' },
          value: { kind: Kind.INT, value: String(sizeOf(def, node)) },
        };
        return {
          ...node,
          arguments: [
            size,
            ...(node.arguments ?? []).filter((a) => a.name.value !== 'first' && a.name.value !== 'last'),
          ],
        };
      },
    }),
  );
  return { sized, usedVariables };
}
