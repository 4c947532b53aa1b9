import type { Caller } from '../auth/caller.js';
import type { GatewayWarning } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Services } from '../services.js';
import { Loaders } from './loaders.js';

/** What every resolver gets: who calls, the services, and this request's DataLoaders. */
export interface GraphQLContext {
  readonly requestId: string;
  /**
   * graphql-ws: the request id of the connection's upgrade, named on the operation's log lines beside `requestId`
   * (`ws:<operation id>`, which the client chose and other connections may use too).
   */
  readonly connection?: string | undefined;
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
 * `logger` may be a function that makes it, or with `namesRequest` the logger whose child naming the request id is
 * the context's: a pino child costs CPU and memory (decision 006), and most operations (and idle subscriptions) never
 * log, so it is made on first use (and with `namesRequest`, without a closure kept per context).
 */
export function createContext(
  services: Services,
  caller: Caller,
  requestId: string,
  logger: Logger | (() => Logger),
  namesRequest = false,
  connection?: string,
): GraphQLContext {
  return new OperationContext(requestId, caller, services, logger, namesRequest, connection);
}

/** A class, not an object literal with a getter: one context per request and per subscription, so its size counts. */
class OperationContext implements GraphQLContext {
  /** Made on first use: a waiting subscription's context loads nothing until its event. */
  private madeLoaders: Loaders | undefined;
  private made: Logger | undefined;
  warnings: GatewayWarning[] | null = null;

  constructor(
    readonly requestId: string,
    readonly caller: Caller,
    readonly services: Services,
    private readonly makeLogger: Logger | (() => Logger),
    private readonly namesRequest: boolean,
    readonly connection: string | undefined,
  ) {}

  get loaders(): Loaders {
    return (this.madeLoaders ??= new Loaders(this.services, this.caller));
  }

  warn(warning: GatewayWarning): void {
    (this.warnings ??= []).push(warning);
  }

  /** The request's logger, its lines naming the app (never its key). */
  get logger(): Logger {
    if (!this.made) {
      const make = this.makeLogger;
      const base =
        typeof make === 'function'
          ? make()
          : !this.namesRequest
            ? make
            : this.connection === undefined
              ? make.child({ requestId: this.requestId })
              : make.child({ requestId: this.requestId, connection: this.connection });
      this.made = this.caller.app ? base.child({ app: this.caller.app }) : base;
    }
    return this.made;
  }
}
