import {
  execute,
  getOperationAST,
  GraphQLError,
  Kind,
  locatedError,
  subscribe,
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
} from 'graphql';
import type { Tracing } from '../telemetry/tracing.js';
import type { GraphQLSchema, DocumentNode, OperationDefinitionNode } from 'graphql';
import type { GraphQLContext } from '../graphql/context.js';
import type { Caller } from '../caller.js';
import type { Logger } from '../logger.js';
import type { AuthResult } from './auth.js';
import type { TrustedDocuments } from './trusted-documents.js';

/** What both streaming transports (graphql-ws, graphql-sse) are given, so they authenticate, limit and execute alike. */
export interface StreamingTransportOptions {
  schema: GraphQLSchema;
  logger: Logger;
  authenticate: (authorization: string | string[] | undefined | null) => AuthResult;
  context: (caller: Caller, requestId: string) => GraphQLContext;
  /** Rate limits (src/server/rate-limit.ts): null when nothing is limited, else the refusal or null. */
  admit?: (
    caller: Caller,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: Record<string, unknown> | null | undefined,
  ) => Promise<GraphQLError | null> | null;
  /** TRUSTED_DOCUMENTS: an operation may come by `documentId` or `extensions.persistedQuery`. */
  trusted?: TrustedDocuments;
}

/** `subscription WaitForMobileId`, or the bare type for an anonymous operation; the document's text never goes in a span. */
export function operationSpanName(args: Pick<ExecutionArgs, 'document' | 'operationName'>): { name: string; type: string; operationName: string | undefined } {
  const op = getOperationAST(args.document, args.operationName);
  const type = op?.operation ?? 'operation';
  const operationName = op?.name?.value;
  return { name: operationName ? `${type} ${operationName}` : type, type, operationName };
}

type SubscribeResult = Awaited<ReturnType<typeof subscribe>>;

/**
 * An error thrown by a subscription's event stream after it started (the stored-event read failing, say) becomes
 * the stream's last result, located at its root field like any resolver error, so the transports mask it as they
 * mask every other error (src/server/errors.ts) instead of passing graphql-js's raw message on, or dropping the
 * connection.
 */
function guard(result: SubscribeResult, args: ExecutionArgs): SubscribeResult {
  if (!result || typeof result !== 'object' || !(Symbol.asyncIterator in result)) return result;
  const iterator = (result as AsyncGenerator<ExecutionResult>)[Symbol.asyncIterator]();
  let failed = false;
  const guarded: AsyncGenerator<ExecutionResult> = {
    async next() {
      if (failed) return { done: true, value: undefined };
      try {
        return await iterator.next();
      } catch (err) {
        failed = true;
        const field = getOperationAST(args.document, args.operationName)?.selectionSet.selections.find((s): s is FieldNode => s.kind === Kind.FIELD);
        const error = err instanceof GraphQLError && err.path ? err : locatedError(err, field ? [field] : undefined, field ? [field.alias?.value ?? field.name.value] : undefined);
        return { done: false, value: { data: null, errors: [error] } };
      }
    },
    return: (value?: unknown) => iterator.return(value as never),
    throw: (err?: unknown) => iterator.throw(err),
    [Symbol.asyncIterator]: () => guarded,
  } as AsyncGenerator<ExecutionResult>;
  return guarded;
}

/**
 * graphql-js's execute and subscribe for the streaming transports (graphql-ws, graphql-sse): a subscription's late
 * errors are guarded (above), and with tracing on each operation gets a span. A subscription's span covers setting
 * it up; each event handed to it has a delivery span of its own (src/events/stream.ts).
 */
export function streamingExecution(tracing: Tracing, transport: 'ws' | 'sse'): { execute: typeof execute; subscribe: typeof subscribe } {
  const guardedSubscribe = (async (args: ExecutionArgs) => guard(await subscribe(args), args)) as typeof subscribe;
  if (!tracing.enabled) return { execute, subscribe: guardedSubscribe };
  const wrap =
    <F extends typeof execute | typeof subscribe>(fn: F): F =>
    ((args: ExecutionArgs) => {
      const { name, type, operationName } = operationSpanName(args);
      const attributes: Record<string, string> = { 'graphql.operation.type': type, 'gateway.transport': transport };
      if (operationName) attributes['graphql.operation.name'] = operationName;
      return tracing.operation(name, attributes, () => fn(args));
    }) as F;
  return { execute: wrap(execute), subscribe: wrap(guardedSubscribe) };
}
