import { IDENTIFICATION_CALLBACK_PREFIX } from '../../identity/completions.js';
import type { IdentityService } from '../../identity/service.js';
import type { Metrics } from '../../metrics.js';
import type { Route } from '../http.js';
import { callbackWebhookRoute } from './callback.js';

/** `/webhooks/identification/<token>`: the token is base64url (the gateway derives 43 characters). */
export const IDENTIFICATION_CALLBACK_PATH = new RegExp(`^${IDENTIFICATION_CALLBACK_PREFIX}([A-Za-z0-9_-]{1,128})$`);

/**
 * The identification completion callback (spec: Events 2), configured per workflow on the platform side with
 * the address `identificationCallbackUrl(workflowId)` shows. The body must name an identification of that
 * API key and workflow; any other id is answered as not found.
 */
export function identificationWebhookRoute(options: { identity: IdentityService; metrics: Metrics }): Route {
  const completions = options.identity.identificationCompletions;
  return callbackWebhookRoute({
    endpoint: 'identification',
    path: IDENTIFICATION_CALLBACK_PATH,
    name: 'POST /webhooks/identification/:token',
    bind: (token) => completions.bind(token),
    receive: (binding, body, meta) => completions.receive(binding, body, meta),
    metrics: options.metrics,
  });
}
