import type { IdentityService } from '../../identity/service.js';
import type { Metrics } from '../../metrics.js';
import type { Route } from '../http.js';
import { callbackWebhookRoute } from './callback.js';

/** `/webhooks/verification/<token>`: the token is base64url (the gateway issues 43 characters). */
export const VERIFICATION_CALLBACK_PATH = /^\/webhooks\/verification\/([A-Za-z0-9_-]{1,128})$/;

/** The callbackUrl handed to the verification interface (spec: Events 1), with a random token per registration. */
export function verificationWebhookRoute(options: { identity: IdentityService; metrics: Metrics }): Route {
  const { identity } = options;
  return callbackWebhookRoute({
    endpoint: 'verification',
    path: VERIFICATION_CALLBACK_PATH,
    name: 'POST /webhooks/verification/:token',
    bind: (token) => identity.callbackBinding(token),
    receive: (binding, body, meta) => identity.receiveCallback(binding, body, meta),
    metrics: options.metrics,
  });
}
