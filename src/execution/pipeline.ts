// The one way through the execution pipeline (docs/decisions/044, 060): trusted documents, prepare, pick the
// operation, admit (scopes, cost, rate limit), run, present (masking, warnings), composed once. MCP calls it for every
// tool; its signature names no transport's types, so POST /graphql, graphql-ws and graphql-sse can move onto it.
import { getOperationAST, getVariableValues, GraphQLError, type DocumentNode, type ExecutionResult, type GraphQLFormattedError, type OperationDefinitionNode, type OperationTypeNode } from 'graphql';
import { ALL_GRANTS, type Caller } from '../caller.js';
import { ErrorCode } from '../errors.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { Logger } from '../logger.js';
import { operationCost } from '../ratelimit/cost.js';
import type { Admission } from './admit.js';
import type { DocumentCache, PreparedDocument } from './prepare.js';
import { deliverable, formatError } from './present.js';
import type { OperationRunner } from './run.js';
import { scopeCheck } from './scopes.js';

/** One operation as any transport carries it: a text, or a trusted document's id. */
export interface OperationParams {
  readonly query?: string;
  readonly documentId?: string;
  readonly operationName?: string;
  readonly variables?: Record<string, unknown>;
}

/** The trusted-documents stage (src/server/trusted-documents.ts TrustedDocuments), as the pipeline calls it. */
export interface TrustedDocumentsStage {
  admit(request: { query?: unknown; documentId?: unknown }): { ok: true; query: string } | { ok: false; message: string; code: string };
}

/** The transports, as metrics and logs name them. */
export type TransportName = 'http' | 'ws' | 'sse' | 'mcp';

/** Why an operation did not run, by stage; nothing was executed (a rate-limit refusal spent no points). */
export type Refusal = {
  readonly ok: false;
  readonly stage: 'trusted' | 'prepare' | 'operation' | 'variables' | 'admit';
  /** Formatted (masked) as the client sees them. */
  readonly errors: readonly GraphQLFormattedError[];
};

/** The operation ran: its result, masked and with its warnings (the present stage). */
export type Executed = { readonly ok: true; readonly result: ExecutionResult & { errors?: readonly GraphQLFormattedError[] } };

export interface RunOperation {
  readonly caller: Caller;
  readonly params: OperationParams;
  readonly transport: TransportName;
  /** The request's id, for the context's log lines. */
  readonly requestId: string;
  /** Operation types this call may run (a read-only tool passes ['query']); default: queries and mutations. */
  readonly allow?: readonly OperationTypeNode[];
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
  runOperation(o: RunOperation): Promise<Refusal | Executed>;
  /**
   * What `params` would spend, and the scope check to run on a caller, without running it: trusted documents, parse,
   * validate, and with `variables` their coercion; or why it cannot run.
   */
  estimate(params: OperationParams): Refusal | OperationEstimate;
}

export interface PipelineOptions {
  readonly documents: DocumentCache;
  readonly admit: Admission;
  readonly runner: OperationRunner;
  readonly trusted: TrustedDocumentsStage | undefined;
  readonly context: (caller: Caller, requestId: string) => GraphQLContext;
  readonly logger: Logger;
  /** The schema the cost of an operation is read from (the rate limit's rule). */
  readonly schema: import('graphql').GraphQLSchema;
}

const QUERIES_AND_MUTATIONS: readonly OperationTypeNode[] = ['query', 'mutation'] as OperationTypeNode[];

export function createPipeline(o: PipelineOptions): Pipeline {
  const scopes = scopeCheck(o.schema);
  const refuse = (stage: Refusal['stage'], errors: readonly GraphQLError[]): Refusal => ({
    ok: false,
    stage,
    errors: errors.map((e) => formatError(e.toJSON(), e, o.logger, o.documents.hideSuggestions)),
  });

  /** Trusted documents, prepare, and the operation picked. */
  const prepare = (params: OperationParams): Refusal | { prepared: PreparedDocument; document: DocumentNode; operation: OperationDefinitionNode } => {
    let query = params.query;
    if (o.trusted) {
      const admission = o.trusted.admit({ query: params.query, documentId: params.documentId });
      if (!admission.ok) return refuse('trusted', [new GraphQLError(admission.message, { extensions: { code: admission.code } })]);
      query = admission.query;
    } else if (params.documentId !== undefined) {
      return refuse('trusted', [new GraphQLError('this gateway has no trusted documents: send the query', { extensions: { code: ErrorCode.BAD_REQUEST } })]);
    }
    if (typeof query !== 'string' || query === '') return refuse('prepare', [new GraphQLError('a query is required', { extensions: { code: ErrorCode.BAD_REQUEST } })]);
    const prepared = o.documents.get(query);
    if (Array.isArray(prepared.document)) return refuse('prepare', prepared.document as readonly GraphQLError[]);
    const document = prepared.document as DocumentNode;
    const operation = params.operationName === undefined ? prepared.anonymous : getOperationAST(document, params.operationName);
    if (!operation) return refuse('operation', [new GraphQLError('Unable to identify the operation: pass operationName', { extensions: { code: ErrorCode.BAD_REQUEST } })]);
    return { prepared, document, operation };
  };

  /**
   * The run stage's own coercion of the variables, before anything runs: BAD_USER_INPUT naming the variable and the
   * path in it (as Apollo marks them), and never the value (the present stage leaves it out: it may hold a password).
   */
  const checkVariables = (operation: OperationDefinitionNode, variables: Record<string, unknown>): Refusal | null => {
    if (!operation.variableDefinitions?.length) return null;
    const coerced = getVariableValues(o.schema, operation.variableDefinitions, variables, { hideSuggestions: o.documents.hideSuggestions });
    if (!coerced.errors) return null;
    return refuse(
      'variables',
      coerced.errors.map((e) => new GraphQLError(e.message, { nodes: e.nodes, originalError: e.originalError ?? e, extensions: { ...e.extensions, code: ErrorCode.BAD_USER_INPUT } })),
    );
  };

  return {
    estimate(params) {
      const found = prepare(params);
      if ('ok' in found) return found;
      if (params.variables !== undefined) {
        const invalid = checkVariables(found.operation, params.variables);
        if (invalid) return invalid;
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

    async runOperation({ caller, params, requestId, allow = QUERIES_AND_MUTATIONS }) {
      const found = prepare(params);
      if ('ok' in found) return found;
      const { prepared, document, operation } = found;
      if (!allow.includes(operation.operation)) {
        return refuse('operation', [new GraphQLError(`this call runs ${allow.join(' or ')} operations only, not a ${operation.operation}; nothing was run`, { extensions: { code: ErrorCode.BAD_REQUEST } })]);
      }
      const invalid = checkVariables(operation, params.variables ?? {});
      if (invalid) return invalid;
      const admitted = o.admit(caller, document, operation, params.variables);
      const refused = admitted instanceof Promise ? await admitted : admitted;
      if (refused) return refuse('admit', [refused]);
      const context = o.context(caller, requestId);
      const result = await o.runner.execute(prepared, operation, params.operationName, context, params.variables);
      return { ok: true, result: deliverable(result, context, o.logger) as Executed['result'] };
    },
  };
}
