import { execute, type DocumentNode, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { GraphQLContext } from '../graphql/context.js';
import { withWarnings } from './present.js';

type Result = ExecutionResult | Promise<ExecutionResult>;

/** What a subscription event cost, for /metrics and tests. */
export interface SharedExecutionStats {
  /** Executions of a subscription's selection for an event: one per event and group of identical subscriptions. */
  executions: number;
  /** Deliveries that took the result of another subscriber's execution instead of executing again. */
  shared: number;
}

/**
 * Executes a subscription's selection once per event for each group of subscriptions whose execution would be
 * identical, and hands every subscriber of the group the same ExecutionResult object (docs/decisions/030).
 *
 * A group is: the same parsed document (the DocumentCache gives one DocumentNode per text), operation name and
 * variables, and the same caller as resolvers see it (the app's owner scope and its grants: what tenancy checks
 * read, src/tenancy.ts). The event is the payload object the subscription's source stream yields: streams over
 * the bus hand every subscriber the same EventRecord, so its subscribers meet here. Which subscribers get an
 * event at all is decided before, per subscriber, by its own stream (`reader` in src/events/stream.ts): sharing
 * never widens what a caller sees, since a result is only shared with subscribers of the same caller.
 *
 * Results are kept for one turn of the event loop only: the subscribers of one publish all arrive within it,
 * and a later delivery of the same object (after the store changed, say) executes again.
 */
export class SharedExecution {
  readonly stats: SharedExecutionStats = { executions: 0, shared: 0 };
  private turn: WeakMap<object, Map<string, Result>> | null = null;
  private readonly documentIds = new WeakMap<DocumentNode, number>();
  private nextDocumentId = 1;
  private readonly endTurn = () => {
    this.turn = null;
  };

  /**
   * The group of a subscription, or null when its execution cannot be shared (a context without a caller, or
   * variables that do not serialize).
   */
  groupOf(args: ExecutionArgs): string | null {
    const caller = (args.contextValue as Partial<GraphQLContext> | undefined)?.caller;
    if (!caller || args.rootValue !== undefined || args.fieldResolver || args.typeResolver) return null;
    let documentId = this.documentIds.get(args.document);
    if (documentId === undefined) {
      documentId = this.nextDocumentId++;
      this.documentIds.set(args.document, documentId);
    }
    let variables: string;
    try {
      variables = JSON.stringify(args.variableValues ?? null);
    } catch {
      return null;
    }
    return `${documentId}\u0000${args.operationName ?? ''}\u0000${caller.scope}\u0000${caller.grants.key}\u0000${variables}`;
  }

  /** The result of `args`'s selection over `event`: executed for the first subscriber of `group` in this turn, then shared. */
  execute(event: unknown, group: string | null, args: ExecutionArgs): Result {
    if (group === null || event === null || typeof event !== 'object') return this.run(event, args);
    if (this.turn === null) {
      this.turn = new WeakMap();
      setImmediate(this.endTurn);
    }
    let byGroup = this.turn.get(event);
    if (byGroup === undefined) {
      byGroup = new Map();
      this.turn.set(event, byGroup);
    }
    const done = byGroup.get(group);
    if (done !== undefined) {
      this.stats.shared += 1;
      return done;
    }
    const result = this.run(event, args);
    byGroup.set(group, result);
    return result;
  }

  private run(event: unknown, args: ExecutionArgs): Result {
    this.stats.executions += 1;
    const context = args.contextValue as GraphQLContext | undefined;
    const cursor = event !== null && typeof event === 'object' ? (event as { cursor?: unknown }).cursor : undefined;
    if (!context || typeof context !== 'object') return withCursor(execute({ ...args, rootValue: event }), cursor);
    // The execution's own view of the context: a warning raised while it runs belongs to this result (so to every
    // subscriber sharing it), not to the subscription whose context happened to execute it.
    const own = Object.create(context) as GraphQLContext & { warnings: GraphQLContext['warnings'] };
    own.warnings = null;
    const result = execute({ ...args, rootValue: event, contextValue: own });
    return result instanceof Promise ? result.then((r) => withWarnings(withCursor(r, cursor), own)) : withWarnings(withCursor(result, cursor), own);
  }
}

/**
 * The event's position in the log (src/events/cursor.ts) as the result's `extensions.cursor`, for the subscriber to
 * resume after: once per execution, so once per event for every subscriber sharing it.
 */
function withCursor<T extends ExecutionResult | Promise<ExecutionResult>>(result: T, cursor: unknown): T {
  if (typeof cursor !== 'string') return result;
  if (result instanceof Promise) return result.then((r) => withCursor(r, cursor)) as T;
  const r = result as ExecutionResult;
  r.extensions = r.extensions ? { ...r.extensions, cursor } : { cursor };
  return result;
}
