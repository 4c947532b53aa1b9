import type { IdentityService } from '../../identity/service.js';
import type { Metrics } from '../../metrics.js';
import type { Route } from '../http.js';
import { WebhookErrorCode } from '../../errors.js';
import { sendOAuthError } from '../respond.js';
import { JSON_CALLBACK_BODY, readWebhookBody } from './body.js';

/** Largest callback body accepted. */
export const VERIFICATION_CALLBACK_BODY_LIMIT = 1024 * 1024;

/** `/webhooks/verification/<token>`: the token is base64url (the gateway issues 43 characters). */
export const VERIFICATION_CALLBACK_PATH = /^\/webhooks\/verification\/([A-Za-z0-9_-]{1,128})$/;

/**
 * The callbackUrl handed to the verification interface (spec: Events 1). The random token in the path
 * is the authentication: an unknown one gets 404 and nothing is read or stored. A known one: the JSON
 * body is appended to the event log, acknowledged with 204, and only then published. A duplicate is
 * acknowledged and not published again.
 */
export function verificationWebhookRoute(options: { identity: IdentityService; metrics: Metrics; bodyLimit?: number }): Route {
  const limit = options.bodyLimit ?? VERIFICATION_CALLBACK_BODY_LIMIT;
  const count = (outcome: string) => options.metrics.webhooks.inc({ endpoint: 'verification', outcome });
  return {
    method: 'POST',
    path: VERIFICATION_CALLBACK_PATH,
    name: 'POST /webhooks/verification/:token',
    async handle(req, res, ctx) {
      const token = ctx.params[0]!;
      // Refuse by token before reading: a forged path costs one indexed lookup.
      if (!(await options.identity.isCallbackToken(token))) {
        count('unknown');
        sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, 'no verification callback is registered at this address', { connection: 'close' });
        return;
      }
      const read = await readWebhookBody(req, { ...JSON_CALLBACK_BODY, limit });
      if (!read.ok) {
        count('rejected');
        sendOAuthError(res, read.status, read.error, read.description, read.close ? { connection: 'close' } : {});
        return;
      }
      const { body, type } = read;

      const outcome = await options.identity.receiveCallback(token, body, { requestId: ctx.requestId, contentType: type });
      if (outcome.status === 'unknown-token') {
        count('unknown');
        sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, 'no verification callback is registered at this address');
        return;
      }
      if (outcome.status === 'invalid') {
        count('rejected');
        sendOAuthError(res, 400, WebhookErrorCode.INVALID_REQUEST, outcome.description);
        return;
      }
      if (outcome.status === 'conflict') {
        // Same verification and status, another body: the first one stands. Acknowledged so that the sender
        // stops retrying; the operator sees it here.
        ctx.logger.warn({ externalId: outcome.event.key, seq: outcome.event.seq }, 'verification callback differs from the one already stored; kept the first');
      }
      count(outcome.status === 'created' ? 'accepted' : outcome.status);
      res.writeHead(204, { 'cache-control': 'no-store' });
      res.end();
      await outcome.publish();
    },
  };
}
