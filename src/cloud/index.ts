import type { Logger } from '../logger.js';
import type { PauseAt } from '../phases.js';
import type { Ledger } from '../store/ledger.js';
import type { UpstreamHttp } from '../upstream/http.js';
import type { Idempotency } from '../upstream/idempotency.js';
import { CloudClient, CloudTokens, type CloudAuth } from './client.js';
import { CloudService } from './service.js';
import { CloudAnswers } from './wire.js';
import type { ShapePaths } from '../json-path.js';

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
  deps: { http: (name: string, baseUrl: string) => UpstreamHttp; ledger: Ledger; idempotency: Idempotency; logger: Logger; shapePaths: ShapePaths; pauseAt?: PauseAt },
): CloudService {
  const http = deps.http('cloud', endpoint.url);
  const answers = new CloudAnswers(deps.shapePaths);
  const client = new CloudClient(http, new CloudTokens(http, endpoint.auth, deps.logger, answers), answers);
  return new CloudService({ client, ledger: deps.ledger, idempotency: deps.idempotency, pauseAt: deps.pauseAt });
}
