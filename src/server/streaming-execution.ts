import {
  createSourceEventStream,
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
import { SharedExecution } from './shared-execution.js';
import { formatError } from './errors.js';
import { withWarnings } from './warnings.js';
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
  /** Subscription results shared by identical subscriptions; one for both transports (src/server/shared-execution.ts). */
  shared?: SharedExecution;
}

const masked = new WeakMap<ExecutionResult, ExecutionResult>();

/**
 * What a streaming transport sends for `result`: the operation's warnings added (as over HTTP), and errors masked
 * like over HTTP (unexpected ones become INTERNAL_SERVER_ERROR for the client, and the log in full). Unchanged
 * results are returned as they are; a masked one is kept per result object, so the subscribers sharing one
 * execution (src/server/shared-execution.ts) share its masking too, logged once.
 */
export function deliverable(result: ExecutionResult, context: GraphQLContext | undefined, logger: Logger): ExecutionResult {
  const warned = withWarnings(result, context);
  const errors = warned.errors;
  if (!errors?.length) return warned;
  const known = warned === result ? masked.get(result) : undefined;
  if (known) return known;
  const out = { ...warned, errors: errors.map((e) => formatError(e.toJSON(), e, logger)) as unknown as GraphQLError[] };
  if (warned === result) masked.set(result, out);
  return out;
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
 * Set on a subscription's ExecutionArgs by a transport that writes each event's result itself (graphql-ws,
 * src/server/ws.ts: one serialized payload per shared result), called with the result and the subscription's args. The subscription's iterator then yields nothing and
 * ends when the stream ends, for the transport to send its `complete`.
 */
export const SEND_RESULT = Symbol('send a subscription result');
export type SendResult = (result: ExecutionResult, args: ExecutionArgs) => void;

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * graphql-js's `subscribe`, with each event's result from `shared` (executed once per event for every group of
 * identical subscriptions, src/server/shared-execution.ts), in one plain iterator (no generator) over the source
 * stream; each result is yielded, or handed to the transport's SEND_RESULT when it set one.
 *
 * An error thrown by the event stream after it started (the stored-event read failing, say) becomes the stream's
 * last result, located at its root field like any resolver error, so the transports mask it as they mask every
 * other error (src/server/errors.ts) instead of passing graphql-js's raw message on, or dropping the connection.
 */
async function sharedSubscribe(args: ExecutionArgs, shared: SharedExecution): Promise<SubscribeResult> {
  const source = await createSourceEventStream(args);
  if (!source || typeof source !== 'object' || !(Symbol.asyncIterator in source)) return source as ExecutionResult;
  const iterator = (source as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  const group = shared.groupOf(args);
  const send = (args as ExecutionArgs & { [SEND_RESULT]?: SendResult })[SEND_RESULT];
  let failed = false;
  let stopped = false;
  const fail = (err: unknown): ExecutionResult => {
    failed = true;
    // The source is finished when its own next() threw; when the execution threw, it is told to stop here.
    if (typeof iterator.return === 'function') iterator.return().catch(() => undefined);
    const field = getOperationAST(args.document, args.operationName)?.selectionSet.selections.find((s): s is FieldNode => s.kind === Kind.FIELD);
    const error = err instanceof GraphQLError && err.path ? err : locatedError(err, field ? [field] : undefined, field ? [field.alias?.value ?? field.name.value] : undefined);
    return { data: null, errors: [error] };
  };
  const stream: AsyncGenerator<ExecutionResult> = {
    async next() {
      if (failed || stopped) return DONE;
      let result: ExecutionResult;
      try {
        for (;;) {
          const step = await iterator.next();
          if (step.done || stopped) return DONE;
          const executed = shared.execute(step.value, group, args);
          // A synchronous execution (the common case) is not awaited: one turn of the microtask queue less per event.
          result = executed instanceof Promise ? await executed : executed;
          if (!send) return { done: false, value: result };
          // The transport writes each result itself; this call returns when the stream ends.
          if (stopped) return DONE;
          send(result, args);
        }
      } catch (err) {
        result = fail(err);
      }
      if (!send) return { done: false, value: result };
      if (!stopped) send(result, args);
      return DONE;
    },
    return: async () => {
      stopped = true;
      if (typeof iterator.return === 'function') await iterator.return();
      return DONE;
    },
    throw: async (err?: unknown) => {
      stopped = true;
      if (typeof iterator.return === 'function') await iterator.return();
      throw err;
    },
    [Symbol.asyncIterator]: () => stream,
  } as AsyncGenerator<ExecutionResult>;
  return stream;
}

/**
 * graphql-js's execute and subscribe for the streaming transports (graphql-ws, graphql-sse): a subscription's late
 * errors are guarded (above), and with tracing on each operation gets a span. A subscription's span covers setting
 * it up; each event handed to it has a delivery span of its own (src/events/stream.ts).
 */
export function streamingExecution(
  tracing: Tracing,
  transport: 'ws' | 'sse',
  shared: SharedExecution = new SharedExecution(),
): { execute: typeof execute; subscribe: typeof subscribe } {
  const guardedSubscribe = ((args: ExecutionArgs) => sharedSubscribe(args, shared)) as typeof subscribe;
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
