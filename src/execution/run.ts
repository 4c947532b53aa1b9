// The *run* stage of the execution pipeline (docs/decisions/044): graphql-js, or a compiled form where one is
// proven equal (a store-only query, decision 035; a cloud creation, decisions 087 and 099); for subscriptions,
// graphql-js's subscribe with each event's result shared by identical subscriptions (decision 030).
import {
  createSourceEventStream,
  execute,
  getOperationAST,
  getVariableValues,
  GraphQLError,
  Kind,
  locatedError,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionNode,
} from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';

import { ErrorCode } from '../errors.js';
import type { WaiterStream } from '../events/stream.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { PreparedDocument } from './prepare.js';
import type { DeliveryGate, ResultStream } from './present.js';
import { SharedExecution, type Group } from './shared.js';
import type { SourceStreams } from './source-stream.js';
import { variablesCheck, type VariablesCheck } from './variables.js';

/** `subscription WaitForMobileId`, or the bare type for an anonymous operation; the document's text never goes in a span. */
export function operationSpanName(args: Pick<ExecutionArgs, 'document' | 'operationName'>): {
  name: string;
  type: string;
  operationName: string | undefined;
} {
  const op = getOperationAST(args.document, args.operationName);
  const type = op?.operation ?? 'operation';
  const operationName = op?.name?.value;
  return { name: operationName ? `${type} ${operationName}` : type, type, operationName };
}

/**
 * Where a subscription's results go when the transport writes each one itself (graphql-ws, src/server/ws.ts: one
 * serialized payload per shared result), handed to `subscribe` as an argument (graphql-ws's `Sink` is the model). The
 * subscription's iterator then yields nothing and ends when the stream ends, for the transport to send its `complete`.
 */
export interface ResultSink {
  next(result: ExecutionResult): void;
  /**
   * The stream's last result, when its source has ended with the event of this result (an EventStream's `finished`:
   * a `limit` or `until` reached): the transport writes it with its end of the subscription, and the stream's
   * `next()` returns done without asking the source again. Absent (DELIVERY_COMPLETE_WITH_LAST=false, or SSE's
   * iterator), that result goes to `next` and the source's next turn ends the stream. True when the transport has ended
   * the subscription itself (written its end and taken it out of its own record of the connection's subscriptions):
   * the stream's `next()` then never settles, so the transport's loop over it does no more work (the protocol would only
   * write nothing and delete the id again), and that loop is collected with the stream (docs/decisions/096). False
   * when nothing was written (the socket closing, a slow consumer closed): the stream ends as it always did.
   */
  last?(result: ExecutionResult): boolean;
}

/** A source that can tell it has nothing more to yield (src/events/stream.ts's EventStream). */
const finished = (source: AsyncIterator<unknown>): boolean => (source as { finished?: unknown }).finished === true;

/** The streaming transports' execute and subscribe: a subscription's results go to `sink` when one is given. */
export interface StreamingExecution {
  execute(args: ExecutionArgs): ReturnType<typeof execute>;
  subscribe(
    args: ExecutionArgs,
    sink?: ResultSink,
  ): ResultStream | ExecutionResult | Promise<ResultStream | ExecutionResult>;
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/** The gate of a stream no transport gates: never held. */
const NEVER_HELD: DeliveryGate = Object.freeze({ held: false, whenResumed: (resume: () => void) => resume() });

/**
 * The sources' answers to the result streams waiting on them (SharedResultStream as a Waiter), one batch per streaming
 * transport, taken in one turn of the microtask queue per batch: as the jobs of resolved promises would be, without a
 * promise, a reaction and a job each. Flat triples: stream, answer, whether it is a failure.
 */
class Answers {
  private readonly handed: unknown[] = [];
  private readonly take = (): void => {
    const handed = this.handed;
    // Answers handed on while these are taken (the next event, already queued) join this batch.
    for (let i = 0; i < handed.length; i += 3) {
      const stream = handed[i] as SharedResultStream;
      try {
        if (handed[i + 2] === true) stream.threw(handed[i + 1]);
        else stream.took(handed[i + 1] as IteratorResult<unknown>);
      } catch (err) {
        // Neither throws but by a bug: the transport gets it as it would from an async loop, and the others go on.
        stream.broke(err);
      }
    }
    handed.length = 0;
  };

  handOn(stream: SharedResultStream, answer: unknown, failed: boolean): void {
    if (this.handed.push(stream, answer, failed) === 3) queueMicrotask(this.take);
  }
}

/**
 * graphql-js's `subscribe`, with each event's result from `shared` (executed once per event for every group of
 * identical subscriptions, src/execution/shared.ts), in one plain iterator (no generator) over the source
 * stream; each result is yielded, or handed to the transport's `sink` when it gave one.
 *
 * An error thrown by the event stream after it started (the stored-event read failing, say) becomes the stream's
 * last result, located at its root field like any resolver error, so the transports mask it as they mask every
 * other error (src/execution/present.ts) instead of passing graphql-js's raw message on, or dropping the connection.
 */
function sharedSubscribe(
  args: ExecutionArgs,
  shared: SharedExecution,
  sink: ResultSink | undefined,
  sources: SourceStreams | undefined,
  answers: Answers,
): Subscribed | Promise<Subscribed> {
  const made = sources ? sources.create(args) : createSourceEventStream(args);
  // A source made at once (a plan's, decision 154) is followed at once: no turn of the microtask queue in between.
  if (made instanceof Promise) return made.then((source) => resultsOf(source, args, shared, sink, answers));
  return resultsOf(made, args, shared, sink, answers);
}

type Subscribed = ResultStream | ExecutionResult;

/** A source stream's results, or the errors it was refused with. */
function resultsOf(
  source: unknown,
  args: ExecutionArgs,
  shared: SharedExecution,
  sink: ResultSink | undefined,
  answers: Answers,
): Subscribed {
  if (!source || typeof source !== 'object' || !(Symbol.asyncIterator in source)) return source as ExecutionResult;
  const iterator = (source as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  return new SharedResultStream(iterator, args, shared, sink, answers) as unknown as ResultStream;
}

/**
 * A subscription's results (see sharedSubscribe). A class rather than an object of closures: a waiting subscription
 * keeps one object, its methods shared by every subscription (docs/decisions/090). Exported only for the count of
 * live ones in test/server/ws-complete-with-last.test.ts; its methods are the AsyncIterator the transports call.
 *
 * @public
 */
export class SharedResultStream {
  private failed = false;
  private stopped = false;
  /** The last result `end` was given, until a `next()` takes it. */
  private last: ExecutionResult | null = null;
  /**
   * The subscription's group of identical ones (`SharedExecution.groupOf`): joined at the first `next()`, left when the
   * stream ends (`leave`); undefined before, null when its execution cannot be shared or once it has left.
   */
  private group: Group | null | undefined = undefined;
  /** See ResultStream.sourceEnded (src/execution/present.ts). */
  sourceEnded: (() => void) | undefined = undefined;
  /** See ResultStream.delivery: read once per result. */
  delivery: DeliveryGate = NEVER_HELD;
  /** See ResultStream.ended: called by `leave`, which every way of ending the stream goes through, once. */
  ended: (() => void) | undefined = undefined;
  /** A result made while `delivery` was held, until it resumes (or `end` or `return` drops it). */
  private heldBack: ExecutionResult | null = null;
  /** With a sink, while `drive`'s promise is pending: what settles it. */
  private settles: ((value: IteratorResult<ExecutionResult> | Promise<never>) => void) | null = null;

  constructor(
    private readonly iterator: AsyncIterator<unknown>,
    private readonly args: ExecutionArgs,
    private readonly shared: SharedExecution,
    private readonly sink: ResultSink | undefined,
    /** Where the source's answers wait for their turn of the microtask queue (`resolve`, `reject`). */
    private readonly answers: Answers,
  ) {}

  next(): Promise<IteratorResult<ExecutionResult>> {
    return this.sink === undefined ? this.pull() : this.drive();
  }

  /** Without a sink: the next result, as an iterator yields it (SSE's). */
  private async pull(): Promise<IteratorResult<ExecutionResult>> {
    if (this.last !== null) return this.takeLast();
    if (this.failed || this.stopped) return DONE;
    const { iterator, shared, args } = this;
    if (this.group === undefined) this.group = shared.groupOf(args);
    let result: ExecutionResult;
    try {
      const step = await iterator.next();
      if (this.last !== null) return this.takeLast();
      if (step.done || this.stopped) {
        this.sourceEnd();
        if (this.last !== null) return this.takeLast();
        this.leave();
        return DONE;
      }
      const executed = shared.execute(step.value, this.group, args);
      // A synchronous execution (the common case) is not awaited: one turn of the microtask queue less per event.
      result = executed instanceof Promise ? await executed : executed;
    } catch (err) {
      result = this.fail(err);
    }
    if (this.delivery.held) return this.holdBack(result);
    return { done: false, value: result };
  }

  /** Without a sink: `result` waits for `delivery` to resume; the `next()` waiting for it is answered then. */
  private holdBack(result: ExecutionResult): Promise<IteratorResult<ExecutionResult>> {
    this.heldBack = result;
    return new Promise<IteratorResult<ExecutionResult>>((resolve) => {
      this.settles = resolve;
      this.delivery.whenResumed(() => this.resumed());
    });
  }

  /** `delivery` resumed: the result held back is delivered, unless the stream ended meanwhile (nothing held then). */
  private resumed(): void {
    const result = this.heldBack;
    if (result === null) return;
    this.heldBack = null;
    if (this.sink !== undefined) return this.executed(result);
    this.settle(this.stopped ? DONE : { done: false, value: result });
  }

  /**
   * With a sink: every result goes to it, and the promise returned settles when the stream ends (done), or never when
   * the transport ended the subscription itself (`ResultSink.last`). Driven by the source's answers (this stream is
   * its Waiter) rather than by an async loop: a waiting subscription holds no suspended async function (a generator,
   * its registers and promise), and no promise of the source's with its reaction and resolving functions.
   */
  private drive(): Promise<IteratorResult<ExecutionResult>> {
    if (this.last !== null) return Promise.resolve(this.takeLast());
    if (this.failed || this.stopped) return Promise.resolve(DONE);
    if (this.settles !== null)
      return Promise.reject(new Error('SharedResultStream: next() called while another waits'));
    if (this.group === undefined) this.group = this.shared.groupOf(this.args);
    return new Promise<IteratorResult<ExecutionResult>>((resolve) => {
      this.settles = resolve;
      this.ask();
    });
  }

  /** The source's next event, for `drive`: answered to `resolve` or `reject` below. */
  private ask(): void {
    const source = this.iterator as AsyncIterator<unknown> & Partial<WaiterStream<unknown>>;
    if (typeof source.nextTo === 'function') return source.nextTo(this);
    let step: Promise<IteratorResult<unknown>>;
    try {
      step = source.next();
    } catch (err) {
      return this.reject(err);
    }
    step.then(
      (result) => this.took(result),
      (err: unknown) => this.threw(err),
    );
  }

  /**
   * Waiter: the source's answer, taken in a turn of the microtask queue of its own (`Answers`), as an awaited promise
   * would take it, and never within the source's own call (a publish, or `nextTo`).
   * @internal
   */
  resolve(step: IteratorResult<unknown>): void {
    this.answers.handOn(this, step, false);
  }

  /** Waiter: the source failed (see resolve). @internal */
  reject(err: unknown): void {
    this.answers.handOn(this, err, true);
  }

  /** An event, or the source's end, for `drive`. @internal */
  took(step: IteratorResult<unknown>): void {
    try {
      if (this.last !== null) return this.settle(this.takeLast());
      if (step.done || this.stopped) {
        this.sourceEnd();
        if (this.last !== null) return this.settle(this.takeLast());
        this.leave();
        return this.settle(DONE);
      }
      const executed = this.shared.execute(step.value, this.group ?? null, this.args);
      // A synchronous execution (the common case) is taken at once: one turn of the microtask queue less per event.
      if (executed instanceof Promise)
        return void executed.then(
          (result) => this.executed(result),
          (err: unknown) => this.threw(err),
        );
      this.executed(executed);
    } catch (err) {
      this.threw(err);
    }
  }

  /** An event's result, for `drive`: written and the next event asked for, or written as the stream's last. */
  private executed(result: ExecutionResult): void {
    const sink = this.sink!;
    try {
      if (this.stopped) return this.settle(DONE);
      // Held: the source is asked for nothing more until it resumes (its events wait in order, in the source).
      if (this.delivery.held) {
        this.heldBack = result;
        return this.delivery.whenResumed(() => this.resumed());
      }
      if (sink.last !== undefined && finished(this.iterator)) {
        this.stop();
        // Ended by the transport: the promise `drive` returned never settles (a shared one would keep every waiter).
        if (sink.last(result)) return void (this.settles = null);
        return this.settle(DONE);
      }
      sink.next(result);
    } catch (err) {
      return this.threw(err);
    }
    this.ask();
  }

  /** The source or the execution threw, for `drive`: the error is the stream's last result. @internal */
  threw(err: unknown): void {
    const result = this.fail(err);
    try {
      if (!this.stopped) this.sink!.next(result);
    } catch (unwritten) {
      // The transport could not write it: `drive`'s promise rejects with that, as an async loop's would.
      return this.settle(Promise.reject(unwritten));
    }
    this.settle(DONE);
  }

  /**
   * The source ended (or the stream was stopped): when it ended by itself, the transport is asked once, and may end the
   * stream as its credential's expiry would (`end`, or its connection closed), whichever noticed the expiry first.
   */
  private sourceEnd(): void {
    const ended = this.stopped ? undefined : this.sourceEnded;
    if (ended === undefined) return;
    this.sourceEnded = undefined;
    ended();
  }

  /** `drive`'s promise rejects with `err` (a bug of this class's: see Answers). @internal */
  broke(err: unknown): void {
    this.settle(Promise.reject(err));
  }

  /** `drive`'s promise settled, once. */
  private settle(value: IteratorResult<ExecutionResult> | Promise<never>): void {
    const ended = this.settles;
    this.settles = null;
    ended?.(value);
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    this.dropHeldBack(DONE);
    this.stop();
    if (typeof this.iterator.return === 'function') await this.iterator.return();
    return DONE;
  }

  async throw(err?: unknown): Promise<IteratorResult<ExecutionResult>> {
    this.dropHeldBack(DONE);
    this.stop();
    if (typeof this.iterator.return === 'function') await this.iterator.return();
    throw err;
  }

  end(result: ExecutionResult): void {
    if (this.heldBack !== null) {
      // What waited for the credential's check is never sent: `result` is the stream's last, in its place.
      this.last = result;
      this.dropHeldBack(this.takeLast());
      if (typeof this.iterator.return === 'function') this.iterator.return().catch(() => undefined);
      return;
    }
    if (this.failed || this.stopped || this.last !== null) return;
    this.last = result;
    // Not awaited: the waiting next() wakes with the source's end and returns `last` instead.
    if (typeof this.iterator.return === 'function') this.iterator.return().catch(() => undefined);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** A result held back is dropped, and the `next()` waiting for it answered `answer`. */
  private dropHeldBack(answer: IteratorResult<ExecutionResult>): void {
    if (this.heldBack === null) return;
    this.heldBack = null;
    this.settle(answer);
  }

  private takeLast(): IteratorResult<ExecutionResult> {
    const value = this.last!;
    this.last = null;
    this.stop();
    if (!this.sink) return { done: false, value };
    this.sink.next(value);
    return DONE;
  }

  /** Ended by its consumer or its last result: nothing more is executed, and it leaves its group. */
  private stop(): void {
    this.stopped = true;
    this.leave();
  }

  /** The stream has ended: it leaves its group, once (the group goes with its last member), and says so, once. */
  private leave(): void {
    const group = this.group;
    this.group = null;
    if (group) this.shared.leave(group);
    const ended = this.ended;
    if (ended === undefined) return;
    this.ended = undefined;
    ended();
  }

  private fail(err: unknown): ExecutionResult {
    this.failed = true;
    this.leave();
    // The source is finished when its own next() threw; when the execution threw, it is told to stop here.
    if (typeof this.iterator.return === 'function') this.iterator.return().catch(() => undefined);
    const { document, operationName } = this.args;
    const field = getOperationAST(document, operationName)?.selectionSet.selections.find(
      (s): s is FieldNode => s.kind === Kind.FIELD,
    );
    const error =
      err instanceof GraphQLError && err.path
        ? err
        : locatedError(err, field ? [field] : undefined, field ? [field.alias?.value ?? field.name.value] : undefined);
    // Bad input its source could find only by reading the log (a resume cursor before events the retention purge has
    // deleted: src/events/replay.ts) is answered as the subscribe's own refusal of it: over graphql-ws (the sink's
    // transport) the errors alone, the one result graphql-ws writes for it; over graphql-sse with `data: null`, as
    // src/server/sse.ts hands graphql-sse that result.
    if (this.sink !== undefined && error.extensions.code === ErrorCode.BAD_USER_INPUT) return { errors: [error] };
    return { data: null, errors: [error] };
  }
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
  /** Introspection off: variable errors carry no "Did you mean …?" (DocumentCache.hideSuggestions). */
  hideSuggestions = false,
  /** SUBSCRIPTION_COMPILED_SOURCE: source event streams made from a plan per document (absent: graphql-js's). */
  sources?: SourceStreams,
): StreamingExecution {
  // Args that say so already (the pipeline's) are not copied to say it.
  const worded = (args: ExecutionArgs): ExecutionArgs =>
    (args.hideSuggestions ?? false) === hideSuggestions ? args : { ...args, hideSuggestions };
  const plainExecute = hideSuggestions ? (args: ExecutionArgs) => execute(worded(args)) : execute;
  const answers = new Answers();
  const guardedSubscribe = (args: ExecutionArgs, sink?: ResultSink) =>
    sharedSubscribe(worded(args), shared, sink, sources, answers);
  if (!tracing.enabled) return { execute: plainExecute, subscribe: guardedSubscribe };
  const span = (args: ExecutionArgs) => {
    const { name, type, operationName } = operationSpanName(args);
    const attributes: Record<string, string> = { 'graphql.operation.type': type, 'gateway.transport': transport };
    if (operationName) attributes['graphql.operation.name'] = operationName;
    return { name, attributes };
  };
  return {
    execute: (args) => {
      const { name, attributes } = span(args);
      return tracing.operation(name, attributes, () => plainExecute(args));
    },
    subscribe: (args, sink) => {
      const { name, attributes } = span(args);
      return tracing.operation(name, attributes, () => guardedSubscribe(args, sink));
    },
  };
}

/** What a root mutation field's resolver returned (its value or its promise) or threw, by response key. */
type Outcome = { value: unknown } | { thrown: unknown };

/**
 * The root outcomes of the compiled mutations running now, by request context. A context is here only while its
 * operation runs on the compiled path (OperationRunner.executeCompiled puts it in and takes it out).
 */
const outcomes = new WeakMap<object, Map<string, Outcome>>();

/** The root resolvers `keepOutcomes` wrapped already (a schema is wrapped once, however many runners it has). */
const wrapped = new WeakSet<GraphQLFieldResolver<unknown, unknown>>();

/**
 * Wraps the resolvers of the mutation root fields `names` in place so that, for a context in `outcomes`, each field's
 * resolver runs at most once: its first call keeps what it returned or threw, a later call on the same context (the
 * graphql-js run after the compiled one) gets that back instead of creating again. For any other context (Apollo's
 * path, the streaming transports, a direct-path operation that is not compiled) the wrapper calls the resolver and
 * keeps nothing.
 */
function keepOutcomes(schema: GraphQLSchema, names: ReadonlySet<string>): void {
  const fields = schema.getMutationType()?.getFields() ?? {};
  for (const name of names) {
    const field = fields[name];
    const resolve = field?.resolve;
    if (!field || !resolve) throw new Error(`compiled mutations: Mutation.${name} has no resolver`);
    if (wrapped.has(resolve)) continue;
    const keeping: GraphQLFieldResolver<unknown, unknown> = (source, args, context, info) => {
      const kept = outcomes.get(context as object);
      if (!kept) return resolve(source, args, context, info);
      const key = String(info.path.key);
      const outcome = kept.get(key);
      if (outcome) {
        if ('thrown' in outcome) throw outcome.thrown;
        return outcome.value;
      }
      try {
        const value = resolve(source, args, context, info);
        kept.set(key, { value });
        return value;
      } catch (thrown) {
        kept.set(key, { thrown });
        throw thrown;
      }
    };
    wrapped.add(keeping);
    field.resolve = keeping;
  }
}

/**
 * Queries and mutations of POST /graphql's direct path: graphql-js, or graphql-jit's compiled form for
 * - a store-only query (every root field in `compiledRoots`: its whole tree reads the gateway's own store, no upstream
 *   call, no write; decision 035),
 * - a mutation of exactly one root field named in `compiledMutations` (a creation: one upstream call and its writes,
 *   then a payload whose tree reads the store; decisions 087 and 099),
 * when graphql-js accepts the variables and the compiled answer holds no error. Any error (a resolver's, a null in a
 * non-null field) runs graphql-js again on the same context, so that error wording, paths and null propagation are
 * graphql-js's. A query's second run repeats store reads only (the request's DataLoaders already hold most of them);
 * a mutation's root resolver is not run again: its outcome from the compiled run is kept on the context
 * (`keepOutcomes`) and handed to graphql-js, and only the store reads below it run again. One root field only,
 * because a mutation's root fields run in turn and graphql-js stops at the first whose non-null error nulls `data`,
 * where graphql-jit may go on to the next one and create what graphql-js would not.
 * Both sets empty: graphql-js alone (the switches, and the equivalence tests' plain path).
 */
export class OperationRunner {
  readonly stats = { compiled: 0, recompiled: 0 };
  /** Each operation's variables check (null: none can be made), kept with the operation of the cached document. */
  private readonly checks = new WeakMap<OperationDefinitionNode, VariablesCheck | null>();

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly compiledRoots: ReadonlySet<string> = new Set(),
    /** Introspection off: variable errors carry no "Did you mean …?" (DocumentCache.hideSuggestions). */
    private readonly hideSuggestions = false,
    private readonly compiledMutations: ReadonlySet<string> = new Set(),
    /**
     * GRAPHQL_VARIABLES_CHECK: before a compiled form runs, the variables are checked by a check made once per
     * operation (src/execution/variables.ts), and graphql-js's getVariableValues runs only when the check refuses them.
     * False: getVariableValues every time.
     */
    private readonly checkVariables = false,
  ) {
    if (compiledMutations.size > 0) keepOutcomes(schema, compiledMutations);
  }

  /** graphql-js's answer, or the compiled form's; graphql-js's promise is returned as it is (no async layer). */
  execute(
    prepared: PreparedDocument,
    operation: OperationDefinitionNode,
    operationName: string | undefined,
    contextValue: GraphQLContext,
    variables: Record<string, unknown> | undefined,
  ): ExecutionResult | Promise<ExecutionResult> {
    const document = prepared.document as DocumentNode;
    const compiled = this.compiledOperation(prepared, document, operation);
    if (compiled) return this.executeCompiled(compiled, document, operation, operationName, contextValue, variables);
    return this.plain(document, operationName, contextValue, variables);
  }

  private plain(
    document: DocumentNode,
    operationName: string | undefined,
    contextValue: GraphQLContext,
    variables: Record<string, unknown> | undefined,
  ): ExecutionResult | Promise<ExecutionResult> {
    return execute({
      schema: this.schema,
      document,
      contextValue,
      variableValues: variables,
      operationName,
      hideSuggestions: this.hideSuggestions,
    });
  }

  private async executeCompiled(
    compiled: CompiledQuery,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    operationName: string | undefined,
    contextValue: GraphQLContext,
    variables: Record<string, unknown> | undefined,
  ): Promise<ExecutionResult> {
    if (this.accepted(operation, variables)) {
      const mutation = operation.operation === 'mutation';
      if (mutation) outcomes.set(contextValue, new Map());
      try {
        let result: ExecutionResult | undefined;
        try {
          result = await compiled.query(undefined, contextValue, variables ?? {});
        } catch {
          result = undefined;
        }
        if (result && !result.errors?.length) {
          this.stats.compiled++;
          return { data: result.data };
        }
        this.stats.recompiled++;
        // A mutation's root resolver answers this run from its outcome above (keepOutcomes).
        if (mutation) return await this.plain(document, operationName, contextValue, variables);
      } finally {
        if (mutation) outcomes.delete(contextValue);
      }
    }
    return this.plain(document, operationName, contextValue, variables);
  }

  /**
   * Whether graphql-js accepts the operation's variables (graphql-jit's own coercion accepts some that graphql-js
   * refuses: decision 087). The operation's check answers when it can; graphql-js's getVariableValues when the check
   * refuses them or is switched off, so a refusal is always graphql-js's.
   */
  private accepted(operation: OperationDefinitionNode, variables: Record<string, unknown> | undefined): boolean {
    const definitions = operation.variableDefinitions;
    if (!definitions?.length) return true;
    if (this.checkVariables) {
      let check = this.checks.get(operation);
      if (check === undefined) {
        check = variablesCheck(this.schema, definitions);
        this.checks.set(operation, check);
      }
      if (check?.(variables ?? {})) return true;
    }
    return !getVariableValues(this.schema, definitions, variables ?? {}, { hideSuggestions: this.hideSuggestions })
      .errors;
  }

  /**
   * The compiled form of a store-only query or of a one-field creation mutation (see the class), made on first use and
   * kept with the document; null for any other operation.
   */
  private compiledOperation(
    prepared: PreparedDocument,
    document: DocumentNode,
    operation: OperationDefinitionNode,
  ): CompiledQuery | null {
    let compiled = prepared.compiled.get(operation);
    if (compiled === undefined) {
      compiled = null;
      const selections = operation.selectionSet.selections;
      const plainField = (s: SelectionNode, roots: ReadonlySet<string>) =>
        s.kind === Kind.FIELD && !s.directives?.length && roots.has(s.name.value);
      const eligible =
        operation.operation === 'query'
          ? this.compiledRoots.size > 0 &&
            selections.every(
              (s) =>
                plainField(s, this.compiledRoots) ||
                (s.kind === Kind.FIELD && !s.directives?.length && s.name.value === '__typename'),
            )
          : operation.operation === 'mutation' &&
            selections.length === 1 &&
            plainField(selections[0]!, this.compiledMutations);
      if (eligible) {
        try {
          const made = compileQuery(this.schema, document, operation.name?.value);
          if (isCompiledQuery(made)) compiled = made;
        } catch {
          compiled = null;
        }
      }
      prepared.compiled.set(operation, compiled);
    }
    return compiled;
  }
}
