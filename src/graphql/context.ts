import type { Logger } from '../logger.js';
import type { Caller } from '../server/auth.js';
import type { Services } from '../services.js';
import { Loaders } from './loaders.js';

/** What every resolver gets: who calls, the services, and this request's DataLoaders. */
export interface GraphQLContext {
  readonly requestId: string;
  readonly caller: Caller;
  readonly logger: Logger;
  readonly services: Services;
  readonly loaders: Loaders;
}

export function createContext(services: Services, caller: Caller, requestId: string, logger: Logger): GraphQLContext {
  return { requestId, caller, logger, services, loaders: new Loaders(services) };
}
