import { execute, type DocumentNode, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';

import type { GraphQLContext } from '../graphql/context.js';
import { Loaders } from '../graphql/loaders.js';
import { withWarnings } from './present.js';

type Result = ExecutionResult | Promise<ExecutionResult>;

/**
 * A group of subscriptions whose executions would be identical (`SharedExecution.groupOf`): one object for all its
 * members while any of them lives, so that finding a group's result at delivery compares objects, not strings.
 */
export class Group {
  /** The subscriptions in it: joined by `groupOf`, gone by `leave`. */
  members = 0;

  constructor(
    /** The group's key: document, operation name, caller's scope and grants (their id), variables. */
    readonly key: string,
  ) {}
}

/** What a subscription event cost, for /metrics and tests. */
export interface SharedExecutionStats {
  /** Executions of a subscription's selection for an event: one per event and group of identical subscriptions. */
  executions: number;
  /** Deliveries that took the result of another subscriber's execution instead of executing again. */
  shared: number;
  /** Executions answered by the compiled selection (SUBSCRIPTION_COMPILED_SELECTION); the others ran graphql-js. */
  compiled: number;
}

/**
 * Executes a subscription's selection once per event for each group of subscriptions whose execution would be
 * identical, and hands every subscriber of the group the same ExecutionResult object (docs/decisions/030).
 *
 * A group is: the same parsed document (the DocumentCache gives one DocumentNode per text), operation name and
 * variables, and the same caller as resolvers see it (the app's owner scope and its grants: what tenancy checks
 * read, src/auth/tenancy.ts). The event is the payload object the subscription's source stream yields: streams over
 * the bus hand every subscriber the same EventRecord, so its subscribers meet here. Which subscribers get an
 * event at all is decided before, per subscriber, by its own stream (`reader` in src/events/stream.ts): sharing
 * never widens what a caller sees, since a result is only shared with subscribers of the same caller.
 *
 * Results are kept for one turn of the event loop only: the subscribers of one publish all arrive within it,
 * and a later delivery of the same object (after the store changed, say) executes again.
 */
export class SharedExecution {
  readonly stats: SharedExecutionStats = { executions: 0, shared: 0, compiled: 0 };
  /** The compiled selection per document and operation name (null: not compiled, graphql-js runs it). */
  private readonly compiledSelections = new WeakMap<DocumentNode, Map<string, CompiledQuery | null>>();
  private turn: WeakMap<object, Map<Group, Result>> | null = null;
  /**
   * The live groups by key. Each subscriber's key is a string of its own, made when its stream starts: looked up then,
   * while it is fresh, its members share one Group, and a delivery finds the group's result by that object. Looked up
   * at delivery instead, each member's string is read in full and hashed there, and compared with the first member's,
   * both long out of the cache by then. An entry goes with its group's last member (`leave`). Counted rather than held
   * weakly: V8's scavenges keep a WeakRef's target alive, so every group, and its key, was promoted to the old
   * generation and stayed there until a full collection (docs/decisions/105).
   */
  private readonly groups = new Map<string, Group>();
  private readonly documentIds = new WeakMap<DocumentNode, number>();
  private nextDocumentId = 1;
  private readonly endTurn = () => {
    this.turn = null;
  };

  /**
   * `compiled`: the schema whose subscription selections run as graphql-jit's compiled form (SUBSCRIPTION_COMPILED_SELECTION,
   * docs/decisions/062); absent, graphql-js runs every execution.
   */
  constructor(private readonly compiled?: GraphQLSchema) {}

  /**
   * The group of a subscription, which it joins as a member until it ends (`leave`), or null when its execution cannot
   * be shared (a context without a caller, or variables that do not serialize).
   */
  groupOf(args: ExecutionArgs): Group | null {
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
    // The grants by their id: one object per set of scopes (src/auth/caller.ts), a number where their key is ~80
    // characters that every subscribe's key would copy and hash. Joined rather than concatenated: a join is one flat
    // string, where `+` makes a tree of V8's cons strings that the group kept while it lived (~200 B more a group).
    const key = [documentId, args.operationName ?? '', caller.scope, caller.grants.id, variables].join('\u0000');
    let group = this.groups.get(key);
    if (group === undefined) {
      group = new Group(key);
      this.groups.set(key, group);
    }
    group.members += 1;
    return group;
  }

  /** A member of `group` ended (its stream's end, `SharedResultStream`): the group goes with its last member. */
  leave(group: Group): void {
    group.members -= 1;
    if (group.members === 0 && this.groups.get(group.key) === group) this.groups.delete(group.key);
  }

  /** How many groups have a member: for tests. */
  get liveGroups(): number {
    return this.groups.size;
  }

  /**
   * The result of `args`'s selection over `event`: executed for the first subscriber of `group` in this turn, then
   * shared. When the asking subscriber is its group's last member and no earlier one kept a result, the result is not
   * kept: nobody else can ask for it (a stream joins its group before it listens, so every subscriber of a publish is
   * counted by then, and one that got its result may leave at once), and the turn's table and its end (a WeakMap, a Map
   * and an immediate) would be made for nobody: a group of one, a mobile-ID subscription's (decision 108).
   */
  execute(event: unknown, group: Group | null, args: ExecutionArgs): Result {
    if (group === null || event === null || typeof event !== 'object') return this.run(event, args);
    const done = this.turn?.get(event)?.get(group);
    if (done !== undefined) {
      this.stats.shared += 1;
      return done;
    }
    if (group.members <= 1) return this.run(event, args);
    if (this.turn === null) {
      this.turn = new WeakMap();
      setImmediate(this.endTurn);
    }
    let byGroup = this.turn.get(event);
    if (byGroup === undefined) {
      byGroup = new Map();
      this.turn.set(event, byGroup);
    }
    const result = this.run(event, args);
    byGroup.set(group, result);
    return result;
  }

  private run(event: unknown, args: ExecutionArgs): Result {
    this.stats.executions += 1;
    const cursor = event !== null && typeof event === 'object' ? (event as { cursor?: unknown }).cursor : undefined;
    return withCursor(this.select(event, args), cursor);
  }

  /** The selection over `event`, compiled or by graphql-js. */
  private select(event: unknown, args: ExecutionArgs): Result {
    const context = args.contextValue as GraphQLContext | undefined;
    if (!context || typeof context !== 'object') return execute({ ...args, rootValue: event });
    // The execution's own view of the context: a warning raised while it runs belongs to this result (so to every
    // subscriber sharing it), not to the subscription whose context happened to execute it.
    const own = new ExecutionContextView(context);
    const compiled = this.compiled ? this.selection(args) : null;
    if (compiled !== null) {
      let answer: ReturnType<CompiledQuery['query']> | undefined;
      try {
        answer = compiled.query(event, own, (args.variableValues ?? {}) as Record<string, unknown>);
      } catch {
        answer = undefined;
      }
      if (answer instanceof Promise)
        return answer.then(
          (r) => this.compiledOrPlain(r, event, args, own),
          () => this.compiledOrPlain(undefined, event, args, own),
        );
      return this.compiledOrPlain(answer, event, args, own);
    }
    return this.plain(event, args, own);
  }

  /**
   * The compiled answer when it holds no error (`{ data }`, as graphql-js answers); otherwise graphql-js runs the
   * selection again, so that an error's wording, path and the nulls it leaves are graphql-js's (as in
   * OperationRunner for HTTP, decision 035). What the compiled run warned is dropped with it.
   */
  private compiledOrPlain(
    answer: ExecutionResult | undefined,
    event: unknown,
    args: ExecutionArgs,
    own: ExecutionContextView,
  ): Result {
    if (answer && !answer.errors?.length) {
      this.stats.compiled += 1;
      return withWarnings({ data: answer.data }, own);
    }
    own.warnings = null;
    return this.plain(event, args, own);
  }

  private plain(event: unknown, args: ExecutionArgs, own: GraphQLContext): Result {
    const result = execute({ ...args, rootValue: event, contextValue: own });
    return result instanceof Promise ? result.then((r) => withWarnings(r, own)) : withWarnings(result, own);
  }

  /** The compiled selection of a subscription's document, made once per document and operation; null when it cannot be compiled. */
  private selection(args: ExecutionArgs): CompiledQuery | null {
    let byName = this.compiledSelections.get(args.document);
    if (byName === undefined) {
      byName = new Map();
      this.compiledSelections.set(args.document, byName);
    }
    const name = args.operationName ?? '';
    let compiled = byName.get(name);
    if (compiled === undefined) {
      compiled = null;
      try {
        const made = compileQuery(this.compiled!, args.document, args.operationName ?? undefined);
        if (isCompiledQuery(made)) compiled = made;
      } catch {
        compiled = null;
      }
      byName.set(name, compiled);
    }
    return compiled;
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

/** One warning of an operation (GraphQLContext's). */
type Warning = NonNullable<GraphQLContext['warnings']>[number];

/**
 * The context one execution of a subscription's selection runs with (`SharedExecution` above): the subscription's
 * own (its caller, services, logger) with warnings and DataLoaders of its own, so that a warning raised while it runs
 * belongs to that result (and to every subscriber sharing it), not to the subscription whose context executed it.
 * An object that reads through to the context rather than `Object.create(context)`: making each subscription's
 * context a prototype cost V8 a prototype transition per delivery (docs/decisions/073).
 */
class ExecutionContextView implements GraphQLContext {
  warnings: Warning[] | null = null;
  /**
   * This execution's DataLoaders, made on first use. Not the subscription's: its context lives for every event, and
   * what one event's execution loaded (a verification's current result, an upstream error) would answer every later
   * one, stale, where each event is to read what is current.
   */
  private madeLoaders: Loaders | undefined;

  constructor(private readonly base: GraphQLContext) {}

  get requestId(): string {
    return this.base.requestId;
  }

  get connection(): string | undefined {
    return this.base.connection;
  }

  get caller(): GraphQLContext['caller'] {
    return this.base.caller;
  }

  get services(): GraphQLContext['services'] {
    return this.base.services;
  }

  get loaders(): GraphQLContext['loaders'] {
    return (this.madeLoaders ??= new Loaders(this.base.services, this.base.caller));
  }

  get logger(): GraphQLContext['logger'] {
    return this.base.logger;
  }

  get lastEventId(): string | undefined {
    return this.base.lastEventId;
  }

  warn(warning: Warning): void {
    (this.warnings ??= []).push(warning);
  }
}
