import { IDENTIFICATION_CALLBACK_PREFIX } from '../../identity/completions.js';
import type { IdentityService } from '../../identity/service.js';
import type { Metrics } from '../../metrics.js';
import type { Route } from '../http.js';
import { WebhookErrorCode } from '../../errors.js';
import { sendOAuthError } from '../respond.js';
import { JSON_CALLBACK_BODY, readWebhookBody } from './body.js';

/** Largest callback body accepted. */
export const IDENTIFICATION_CALLBACK_BODY_LIMIT = 1024 * 1024;

/** `/webhooks/identification/<token>`: the token is base64url (the gateway derives 43 characters). */
export const IDENTIFICATION_CALLBACK_PATH = new RegExp(`^${IDENTIFICATION_CALLBACK_PREFIX}([A-Za-z0-9_-]{1,128})$`);

/**
 * The identification completion callback (spec: Events 2), configured per workflow on the platform side with
 * the address `identificationCallbackUrl(workflowId)` shows. The token in the path is the authentication: an
 * unknown one gets 404 and nothing is read. A known one: the JSON body, which must name an identification of
 * that API key and workflow, is appended to the event log, acknowledged with 204, and only then published. A
 * duplicate is acknowledged and not published again.
 */
export function identificationWebhookRoute(options: { identity: IdentityService; metrics: Metrics; bodyLimit?: number }): Route {
  const completions = options.identity.identificationCompletions;
  const limit = options.bodyLimit ?? IDENTIFICATION_CALLBACK_BODY_LIMIT;
  const count = (outcome: string) => options.metrics.webhooks.inc({ endpoint: 'identification', outcome });
  return {
    method: 'POST',
    path: IDENTIFICATION_CALLBACK_PATH,
    name: 'POST /webhooks/identification/:token',
    async handle(req, res, ctx) {
      const token = ctx.params[0]!;
      // Refuse by token before reading: a forged path costs one indexed lookup.
      if (!(await completions.isCallbackToken(token))) {
        count('unknown');
        sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, 'no identification callback is registered at this address', { connection: 'close' });
        return;
      }
      const read = await readWebhookBody(req, { ...JSON_CALLBACK_BODY, limit });
      if (!read.ok) {
        count('rejected');
        sendOAuthError(res, read.status, read.error, read.description, read.close ? { connection: 'close' } : {});
        return;
      }
      const { body, type } = read;

      const outcome = await completions.receive(token, body, { requestId: ctx.requestId, contentType: type });
      if (outcome.status === 'unknown-token') {
        count('unknown');
        sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, 'no identification callback is registered at this address');
        return;
      }
      if (outcome.status === 'unknown-identification') {
        count('unknown');
        sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, `identification ${outcome.id} was not created through this gateway for this callback address`);
        return;
      }
      if (outcome.status === 'invalid') {
        count('rejected');
        sendOAuthError(res, 400, WebhookErrorCode.INVALID_REQUEST, outcome.description);
        return;
      }
      if (outcome.status === 'conflict') {
        // Same identification, status and event, another body: the first one stands. Acknowledged so that the
        // sender stops retrying; the operator sees it here.
        ctx.logger.warn({ identificationId: outcome.event.key, seq: outcome.event.seq }, 'identification callback differs from the one already stored; kept the first');
      }
      count(outcome.status === 'created' ? 'accepted' : outcome.status);
      res.writeHead(204, { 'cache-control': 'no-store' });
      res.end();
      await outcome.publish();
    },
  };
}
