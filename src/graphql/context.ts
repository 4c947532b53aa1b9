import type { Caller } from '../auth/caller.js';
import type { GatewayWarning } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Services } from '../services.js';
import { Loaders } from './loaders.js';

/** What every resolver gets: who calls, the services, and this request's DataLoaders. */
export interface GraphQLContext {
  readonly requestId: string;
  readonly caller: Caller;
  readonly logger: Logger;
  readonly services: Services;
  readonly loaders: Loaders;
  /** Warnings of this operation, sent in the response's `extensions.warnings` (null until one is added). */
  readonly warnings: readonly GatewayWarning[] | null;
  warn(warning: GatewayWarning): void;
  /** Over SSE, the request's Last-Event-ID: a stream without `after` resumes after it (src/graphql/subscriptions.ts). */
  lastEventId?: string;
}

/**
 * `logger` may be a function that makes it: a pino child costs CPU and memory (decision 006), and most
 * operations (and idle subscriptions) never log, so it is made on first use.
 */
export function createContext(
  services: Services,
  caller: Caller,
  requestId: string,
  logger: Logger | (() => Logger),
): GraphQLContext {
  return new OperationContext(requestId, caller, services, logger);
}

/** A class, not an object literal with a getter: one context per request and per subscription, so its size counts. */
class OperationContext implements GraphQLContext {
  readonly loaders: Loaders;
  private made: Logger | undefined;
  warnings: GatewayWarning[] | null = null;

  constructor(
    readonly requestId: string,
    readonly caller: Caller,
    readonly services: Services,
    private readonly makeLogger: Logger | (() => Logger),
  ) {
    this.loaders = new Loaders(services, caller);
  }

  warn(warning: GatewayWarning): void {
    (this.warnings ??= []).push(warning);
  }

  /** The request's logger, its lines naming the app (never its key). */
  get logger(): Logger {
    if (!this.made) {
      const base = typeof this.makeLogger === 'function' ? this.makeLogger() : this.makeLogger;
      this.made = this.caller.app ? base.child({ app: this.caller.app }) : base;
    }
    return this.made;
  }
}

/**
 * The context one execution of a subscription's selection runs with (src/execution/shared.ts): the subscription's
 * own (its caller, services, DataLoaders, logger) with warnings of its own, so that a warning raised while it runs
 * belongs to that result (and to every subscriber sharing it), not to the subscription whose context executed it.
 * An object that reads through to the context rather than `Object.create(context)`: making each subscription's
 * context a prototype cost V8 a prototype transition per delivery (docs/decisions/073).
 */
export class ExecutionContextView implements GraphQLContext {
  warnings: GatewayWarning[] | null = null;

  constructor(private readonly base: GraphQLContext) {}

  get requestId(): string {
    return this.base.requestId;
  }

  get caller(): Caller {
    return this.base.caller;
  }

  get services(): Services {
    return this.base.services;
  }

  get loaders(): Loaders {
    return this.base.loaders;
  }

  get logger(): Logger {
    return this.base.logger;
  }

  get lastEventId(): string | undefined {
    return this.base.lastEventId;
  }

  warn(warning: GatewayWarning): void {
    (this.warnings ??= []).push(warning);
  }
}
