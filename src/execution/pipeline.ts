// The one way through the execution pipeline (docs/decisions/044, 060): trusted documents, prepare, pick the
// operation, admit (scopes, cost, rate limit), run, present (masking, warnings), composed once. MCP calls it for every
// tool; its signature names no transport's types, so POST /graphql, graphql-ws and graphql-sse can move onto it.
import {
  execute,
  getOperationAST,
  getVariableValues,
  GraphQLError,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLFormattedError,
  type OperationDefinitionNode,
  type OperationTypeNode,
} from 'graphql';

import { ALL_GRANTS, type Caller, type Scope } from '../auth/caller.js';
import { ErrorCode } from '../errors.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { Logger } from '../logger.js';
import { operationCost } from '../ratelimit/cost.js';
import type { LiveSubscriptions } from '../ratelimit/live-subscriptions.js';
import type { Admission } from './admit.js';
import type { DocumentCache, PreparedDocument } from './prepare.js';
import {
  formatError,
  outcomePresenter,
  UserInputError,
  type Executed,
  type Presenter,
  type Ran,
  type Refusal,
  type RefusalStage,
} from './present.js';
import type { OperationRunner, ResultSink, StreamingExecution } from './run.js';
import { scopeCheck } from './scopes.js';
import { nullWhereRequired, requiredPlaces, unsoundPath, type RequiredPlace } from './variables.js';

/** One operation as any transport carries it: a text, or a trusted document's id. */
export interface OperationParams {
  readonly query?: string;
  readonly documentId?: string;
  readonly operationName?: string;
  readonly variables?: Record<string, unknown>;
  /** The request's extensions (a persisted query's hash, which the trusted-documents stage reads). */
  readonly extensions?: unknown;
}

/** The trusted-documents stage (src/server/trusted-documents.ts TrustedDocuments), as the pipeline calls it. */
export interface TrustedDocumentsStage {
  /** `owner`: the caller's owner scope, whose persisted queries a hash alone names (null: none, as for an estimate). */
  admit(
    request: {
      query?: unknown;
      documentId?: unknown;
      extensions?: unknown;
    },
    owner: string | null,
  ): { ok: true; query: string } | { ok: false; message: string; code: string };
}

/**
 * With TRUSTED_DOCUMENTS off, the check of Apollo's persisted-query extension and of a `documentId` that POST /graphql
 * makes (src/server/trusted-documents.ts untrustedRefusal): a refusal, or null to run the text as it was sent.
 */
export type UntrustedCheck = (request: {
  query?: unknown;
  documentId?: unknown;
  extensions?: unknown;
}) => { message: string; code: string } | null;

/** The transports, as metrics and logs name them. */
export type TransportName = 'http' | 'ws' | 'sse' | 'mcp';

export type { Executed, Ran, Refusal } from './present.js';
export type { ResultSink } from './run.js';

export interface RunOperation<T = Refusal | Executed> {
  readonly caller: Caller;
  readonly params: OperationParams;
  readonly transport: TransportName;
  /** The request's id, for the context's log lines. */
  readonly requestId: string;
  /** Operation types this call may run (a read-only tool passes ['query']); default: queries and mutations. */
  readonly allow?: readonly OperationTypeNode[];
  /**
   * Why the operation picked may not run on this call beyond its type (a refusal's message), or null: an MCP tool
   * that runs at once checks what the operation a trusted document's id names now does (a reload may change it).
   */
  readonly vet?: (operation: OperationDefinitionNode) => string | null;
  /** The operation's context when the transport made it already (HTTP, with its request's logger); else made here once admitted. */
  readonly context?: GraphQLContext;
  /**
   * The transport resolved trusted documents on its own wire already (POST /graphql must, since GET, batches and APQ
   * go to Apollo): `params.query` is the admitted text, and the trusted stage is not run a second time.
   */
  readonly trustedResolved?: boolean;
  /** `params.query` as the transport's framework parsed and validated it with the prepare stage's rules (Apollo). */
  readonly validated?: DocumentNode;
  /**
   * When the variables are coerced: `before-admit` (the default), or `in-run`, by the run stage once admitted, as
   * Apollo Server does (POST /graphql answers as Apollo would). Either way bad input spends no rate-limit points.
   */
  readonly variables?: 'before-admit' | 'in-run';
  /** How the outcome is presented (src/execution/present.ts); default: `Refusal | Executed` (MCP). */
  readonly present?: Presenter<T>;
  /**
   * Where a subscription's results go, one by one (graphql-ws writes each itself): a typed argument, never a field of
   * graphql-js's ExecutionArgs. Without one, a subscription's results are yielded by the stream the presenter gets.
   */
  readonly sink?: ResultSink;
}

/** What an operation would spend (the admit stage's rate-limit rule), worked out without spending it. */
export interface OperationEstimate {
  readonly operation: OperationTypeNode;
  readonly bucket: 'creations' | 'reads';
  readonly points: number;
  /** The admit stage's scope refusal for `caller` (FORBIDDEN naming the field and the missing scope), or null. */
  forbidden(caller: Caller): GraphQLFormattedError | null;
}

export interface Pipeline {
  runOperation<T = Refusal | Executed>(o: RunOperation<T>): Promise<T>;
  /**
   * What `params` would spend, and the scope check to run on a caller, without running it: trusted documents, parse,
   * validate, and with `variables` their coercion; or why it cannot run. `trustedResolved`: `params.query` was admitted
   * by the trusted documents already (an agent's plan stores the text it was made from), as in runOperation.
   */
  estimate(params: OperationParams, o?: { trustedResolved?: boolean }): Refusal | OperationEstimate;
  /**
   * The admit stage's scope check of a subscription that runs (`ran`, as its transport got it) for `caller` as a
   * reload left it: FORBIDDEN naming the field and the scope it now lacks, or null. From the parsed operation the
   * subscription keeps; its requirements were worked out when it was admitted.
   */
  forbiddenNow(caller: Caller, ran: Ran, opened: Caller): GraphQLError | null;
}

export interface PipelineOptions {
  readonly documents: DocumentCache;
  readonly admit: Admission;
  readonly runner: OperationRunner;
  readonly trusted: TrustedDocumentsStage | undefined;
  /** The trusted-documents stage when TRUSTED_DOCUMENTS is off (`trusted` undefined). */
  readonly untrusted: UntrustedCheck;
  readonly context: (caller: Caller, requestId: string) => GraphQLContext;
  readonly logger: Logger;
  /** The schema the cost of an operation is read from (the rate limit's rule). */
  readonly schema: import('graphql').GraphQLSchema;
  /**
   * The run stage of the streaming transports (src/execution/run.ts streamingExecution: graphql-js, each subscription
   * event's result shared, a span per operation named after its transport). Other transports run `runner`.
   */
  readonly streaming?: Partial<Record<'ws' | 'sse', StreamingExecution>>;
  /**
   * APP_LIVE_SUBSCRIPTIONS: each subscription of the streaming transports is counted here before the admit stage (so
   * that one refused spends nothing, and subscribes sent at once cannot all pass the bound), and given back when its
   * stream ends for any reason (ResultStream.ended), or at once when it never streams. Absent: nothing is counted.
   */
  readonly live?: LiveSubscriptions;
}

const QUERIES_AND_MUTATIONS: readonly OperationTypeNode[] = ['query', 'mutation'] as OperationTypeNode[];
/** Where a subscription refused by `allow` runs instead (docs/contract.md, Routes). */
const SUBSCRIPTIONS_RUN_ON = '. Subscriptions run over WebSocket (/graphql) and Server-Sent Events (/graphql/stream)';

/** The scopes whose reach an approver's `approves` (its apps file entry) narrows to some apps' plans. */
const APPROVE_SCOPES: ReadonlySet<Scope> = new Set<Scope>(['cloud:approve', 'identity:approve']);

/** Whether two `approves` lists name the same apps (absent: every app's). */
function sameApps(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  const set = new Set(a);
  return b.every((app) => set.has(app));
}

/** How a subscription's FORBIDDEN ends when a reload took a scope it needs from its app. */
const RELOADED = 'the configuration was reloaded and the subscription has ended';

/**
 * BAD_USER_INPUT for variables that hold the NUL character, a lone surrogate or a number JSON cannot hold
 * (`unsoundPath`), naming where; null when they do not.
 */
function unsoundRefusal(variables: Readonly<Record<string, unknown>>): readonly GraphQLError[] | null {
  const at = unsoundPath(variables);
  if (at === null) return null;
  return [
    new UserInputError(
      new GraphQLError(`Variable "$${at.path}" ${at.reason}; nothing was run`, {
        extensions: { field: at.path },
      }),
    ),
  ];
}

export function createPipeline(o: PipelineOptions): Pipeline {
  const scopes = scopeCheck(o.schema);
  const outcome = outcomePresenter(o.logger, o.documents.hideSuggestions);
  const refuse = (stage: RefusalStage, errors: readonly GraphQLError[]): Refusal =>
    outcome.refused(stage, errors, undefined) as Refusal;
  type Found = { prepared: PreparedDocument; document: DocumentNode; operation: OperationDefinitionNode };
  /** Each operation's variables that may be left out but not null (`requiredPlaces`), made at its first request. */
  const places = new WeakMap<OperationDefinitionNode, readonly RequiredPlace[]>();
  /**
   * BAD_USER_INPUT for a null given to a variable used where a value is required (graphql-js would refuse it in the
   * run, at the field, as an error of the gateway's); null when there is none.
   */
  const nullRefusal = (
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: Readonly<Record<string, unknown>>,
  ): readonly GraphQLError[] | null => {
    if (!operation.variableDefinitions?.length) return null;
    let of = places.get(operation);
    if (of === undefined) places.set(operation, (of = requiredPlaces(o.schema, document, operation)));
    const place = of.length === 0 ? null : nullWhereRequired(of, variables);
    if (place === null) return null;
    const message = `Variable "$${place.variable}" must not be null: it is used where a value of type "${place.type}" is required (leave it out for its default); nothing was run`;
    return [new UserInputError(new GraphQLError(message, { extensions: { field: place.variable } }))];
  };
  type Refused = { stage: RefusalStage; errors: readonly GraphQLError[] };

  /** Trusted documents, prepare, and the operation picked. */
  const prepare = (
    params: OperationParams,
    owner: string | null,
    trustedResolved = false,
    validated?: DocumentNode,
  ): Refused | Found => {
    let query = params.query;
    if (trustedResolved) {
      // The transport's own wire resolved it.
    } else if (o.trusted) {
      const admission = o.trusted.admit(
        { query: params.query, documentId: params.documentId, extensions: params.extensions },
        owner,
      );
      if (!admission.ok)
        return {
          stage: 'trusted',
          errors: [new GraphQLError(admission.message, { extensions: { code: admission.code } })],
        };
      query = admission.query;
    } else {
      const refused = o.untrusted(params);
      if (refused !== null)
        return {
          stage: 'trusted',
          errors: [new GraphQLError(refused.message, { extensions: { code: refused.code } })],
        };
    }
    if (typeof query !== 'string' || query === '')
      return {
        stage: 'parse',
        errors: [new GraphQLError('a query is required', { extensions: { code: ErrorCode.BAD_REQUEST } })],
      };
    const prepared = o.documents.get(query, validated);
    if (prepared.refusedAt !== null)
      return { stage: prepared.refusedAt, errors: prepared.document as readonly GraphQLError[] };
    const document = prepared.document as DocumentNode;
    const operation =
      params.operationName === undefined ? prepared.anonymous : getOperationAST(document, params.operationName);
    if (!operation) {
      // graphql-js's own words (Apollo's too): no operation, several and no name, or an unknown name. Nothing runs:
      // execute refuses before it reads anything when it cannot pick the operation.
      const picked = (execute({ schema: o.schema, document, operationName: params.operationName }) as ExecutionResult)
        .errors?.[0];
      const message = picked?.message ?? 'Unable to identify the operation: pass operationName';
      return {
        stage: 'operation',
        errors: [new GraphQLError(message, { extensions: { code: ErrorCode.BAD_REQUEST } })],
      };
    }
    return { prepared, document, operation };
  };

  /**
   * The run stage's own coercion of the variables, before anything runs: BAD_USER_INPUT naming the variable and the
   * path in it (as Apollo marks them), and never the value (the present stage leaves it out: it may hold a password).
   */
  const checkVariables = (
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: Record<string, unknown>,
  ): readonly GraphQLError[] | null => {
    if (!operation.variableDefinitions?.length) return null;
    const refused = unsoundRefusal(variables) ?? nullRefusal(document, operation, variables);
    if (refused) return refused;
    const coerced = getVariableValues(o.schema, operation.variableDefinitions, variables, {
      hideSuggestions: o.documents.hideSuggestions,
    });
    return coerced.errors ? coerced.errors.map((e) => new UserInputError(e)) : null;
  };

  return {
    estimate(params, options) {
      const found = prepare(params, null, options?.trustedResolved);
      if (!('prepared' in found)) return refuse(found.stage, found.errors);
      if (params.variables !== undefined) {
        const invalid = checkVariables(found.document, found.operation, params.variables);
        if (invalid) return refuse('variables', invalid);
      }
      const cost = operationCost(o.schema, found.document, found.operation, params.variables);
      return {
        operation: found.operation.operation,
        bucket: cost.bucket,
        points: cost.points,
        forbidden: (caller) => {
          const refused = caller.grants === ALL_GRANTS ? null : scopes(caller.grants, found.document, found.operation);
          return refused && formatError(refused.toJSON(), refused, o.logger);
        },
      };
    },

    forbiddenNow(caller, ran, opened) {
      const approves = sameApps(opened.approves, caller.approves);
      if (caller.grants === ALL_GRANTS && approves) return null;
      // What the subscription was admitted under must still hold: a scope it names that the app lost, even one of
      // several that open its field, or an approve scope whose apps (`approves`) the reload changed.
      const lost = (scope: Scope): string | null =>
        !opened.grants.has(scope)
          ? null
          : !caller.grants.has(scope)
            ? 'this app no longer holds it'
            : !approves && APPROVE_SCOPES.has(scope)
              ? 'the apps whose plans this app approves have changed'
              : null;
      return scopes(caller.grants, ran.document, ran.operation, RELOADED, lost);
    },

    async runOperation<T>(run: RunOperation<T>): Promise<T> {
      const { caller, params, requestId, allow = QUERIES_AND_MUTATIONS } = run;
      const present = run.present ?? (outcome as unknown as Presenter<T>);
      let found: ReturnType<typeof prepare>;
      try {
        found = prepare(params, caller.scope, run.trustedResolved, run.validated);
      } catch (err) {
        // A fault of the preparation's own (src/execution/prepare.ts), answered as a throw of the run is.
        return present.threw(err, run.context ?? o.context(caller, requestId));
      }
      if (!('prepared' in found)) return present.refused(found.stage, found.errors, run.context);
      const { prepared, document, operation } = found;
      // Named before the allow check: Apollo names the request's span once it has picked the operation, refused or not.
      present.picked?.(operation.operation, operation.name?.value || null);
      if (!allow.includes(operation.operation)) {
        const type = operation.operation;
        const refused = `this call runs ${allow.join(' or ')} operations only, not a ${type}; nothing was run`;
        const message = type === 'subscription' ? refused + SUBSCRIPTIONS_RUN_ON : refused;
        return present.refused(
          'allow',
          [new GraphQLError(message, { extensions: { code: ErrorCode.BAD_REQUEST } })],
          run.context,
        );
      }
      const vetoed = run.vet?.(operation);
      if (vetoed)
        return present.refused(
          'allow',
          [new GraphQLError(vetoed, { extensions: { code: ErrorCode.BAD_REQUEST } })],
          run.context,
        );
      if (run.variables !== 'in-run') {
        const invalid = checkVariables(document, operation, params.variables ?? {});
        if (invalid) return present.refused('variables', invalid, run.context);
      } else if (params.variables) {
        // What graphql-js coerces in the run takes an unsound value (the NUL character, a lone surrogate, a number JSON
        // cannot hold), and a null where the run refuses it at the field: both refused here, before anything runs.
        const refused = unsoundRefusal(params.variables) ?? nullRefusal(document, operation, params.variables);
        if (refused) return present.refused('variables', refused, run.context);
      }
      let context = run.context;
      const streaming = run.transport === 'ws' || run.transport === 'sse' ? o.streaming?.[run.transport] : undefined;
      // A subscription that would stream is one of its app's live ones from here: given back below unless its stream
      // takes it over.
      let release: (() => void) | undefined;
      if (streaming && o.live && operation.operation === 'subscription') {
        const taken = o.live.take(caller);
        if (typeof taken !== 'function') return present.refused('admit', [taken], context);
        release = taken;
      }
      try {
        // Coerced in the run, the variables are checked here only if the admit stage would spend points on them.
        const runTakes =
          run.variables === 'in-run'
            ? () => checkVariables(document, operation, params.variables ?? {}) === null
            : undefined;
        const admitted = o.admit(caller, document, operation, params.variables, runTakes);
        const refused = admitted instanceof Promise ? await admitted : admitted;
        if (refused) {
          release?.();
          return present.refused('admit', [refused], context);
        }
      } catch (err) {
        release?.();
        return present.threw(err, context ?? o.context(caller, requestId));
      }
      if (context === undefined) {
        try {
          context = o.context(caller, requestId);
        } catch (err) {
          // Counted above: a failure to make the context must not keep the app's live-subscription place.
          release?.();
          throw err;
        }
      }
      let result: ExecutionResult;
      try {
        if (streaming) {
          const args: ExecutionArgs = {
            schema: o.schema,
            document,
            variableValues: params.variables ?? null,
            operationName: params.operationName ?? null,
            contextValue: context,
            hideSuggestions: o.documents.hideSuggestions,
          };
          const ran = { query: prepared.query, document, operationName: params.operationName ?? null, operation };
          if (operation.operation !== 'subscription') {
            const executed = streaming.execute(args);
            return present.executed(executed instanceof Promise ? await executed : executed, context, ran);
          }
          const made = streaming.subscribe(args, run.sink);
          const subscribed = made instanceof Promise ? await made : made;
          if (Symbol.asyncIterator in subscribed) {
            // The stream gives the count back when it ends, however it ends.
            subscribed.ended = release;
            release = undefined;
            return present.subscribed!(subscribed, context, ran);
          }
          release?.();
          return present.executed(subscribed as ExecutionResult, context, ran);
        }
        const executed = o.runner.execute(prepared, operation, params.operationName, context, params.variables);
        result = executed instanceof Promise ? await executed : executed;
      } catch (err) {
        release?.();
        return present.threw(err, context);
      }
      return present.executed(result, context);
    },
  };
}
