import type { ShapePaths } from '../config/json-path.js';
import type { Logger } from '../logger.js';
import type { PauseAt } from '../phases.js';
import type { Ledger } from '../store/ledger.js';
import type { UpstreamHttp } from '../upstream/http.js';
import type { Idempotency } from '../upstream/idempotency.js';
import { CloudClient, CloudTokens, type CloudAuth } from './client.js';
import { CloudService } from './service.js';
import { CloudAnswers } from './wire.js';

export { CloudService } from './service.js';

/** Where the cloud API answers and how the gateway authorizes there (the composition root resolves it). */
export interface CloudEndpoint {
  readonly url: string;
  readonly auth: CloudAuth;
}

/**
 * The cloud service over one endpoint. Like the identity and mobile-ID factories, it is handed an
 * address and credentials and never learns whether a simulator stands behind them.
 */
export function createCloudService(
  endpoint: CloudEndpoint,
  deps: {
    http: (name: string, baseUrl: string) => UpstreamHttp;
    ledger: Ledger;
    idempotency: Idempotency;
    logger: Logger;
    shapePaths: ShapePaths;
    pauseAt?: PauseAt;
  },
): CloudService {
  const http = deps.http('cloud', endpoint.url);
  const answers = new CloudAnswers(deps.shapePaths);
  // The token endpoint has its own breaker (and pool): an outage of it is not the creation endpoints' failure.
  const tokens = new CloudTokens(deps.http('cloud-token', endpoint.url), endpoint.auth, deps.logger, answers);
  return new CloudService({
    client: new CloudClient(http, tokens, answers),
    ledger: deps.ledger,
    idempotency: deps.idempotency,
    pauseAt: deps.pauseAt,
  });
}
