import { WebhookErrorCode } from '../../errors.js';
import type { CallbackReceipt } from '../../identity/callbacks.js';
import type { Metrics } from '../../metrics.js';
import type { Route } from '../http.js';
import { sendOAuthError } from '../respond.js';
import { CALLBACK_BODY, readWebhookBody } from './body.js';

/** Largest callback body accepted. */
export const CALLBACK_BODY_LIMIT = 1024 * 1024;

export interface CallbackRouteOptions<B> {
  /** Metric label and the noun of every message: `verification`, `identification`. */
  endpoint: string;
  path: RegExp;
  name: string;
  /** The address's binding (looked up once per request), or null for a token the gateway did not issue. */
  bind(token: string): Promise<B | null>;
  receive(binding: B, body: unknown, meta: Record<string, unknown>): Promise<CallbackReceipt>;
  metrics: Metrics;
}

/**
 * The skeleton shared by the identity callbacks (spec: Events 1 and 2). The token in the path is the
 * authentication: an unknown one gets 404 and nothing is read or stored. A known one: the body (JSON, or form
 * fields) goes to the service, which appends it to the event log; then 204, and only then it is published. An
 * exact repeat is acknowledged and not published again; every distinct body is kept and published once.
 */
export function callbackWebhookRoute<B>(options: CallbackRouteOptions<B>): Route {
  const { endpoint } = options;
  const limit = CALLBACK_BODY_LIMIT;
  const count = (outcome: string) => options.metrics.webhooks.inc([endpoint, outcome]);
  const unknownAddress = `no ${endpoint} callback is registered at this address`;
  return {
    method: 'POST',
    path: options.path,
    name: options.name,
    async handle(req, res, ctx) {
      const token = ctx.params[0]!;
      // Refuse by token before reading: a forged path costs one indexed lookup.
      const binding = await options.bind(token);
      if (binding === null) {
        count('unknown');
        sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, unknownAddress, { connection: 'close' });
        return;
      }
      const read = await readWebhookBody(req, { ...CALLBACK_BODY, limit });
      if (!read.ok) {
        count('rejected');
        sendOAuthError(res, read.status, read.error, read.description, read.close ? { connection: 'close' } : {});
        return;
      }

      const outcome = await options.receive(binding, read.body, {
        requestId: ctx.requestId,
        contentType: read.type,
      });
      if (outcome.status === 'not-found') {
        count('unknown');
        sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, outcome.description);
        return;
      }
      if (outcome.status === 'not-yet') {
        count('not-yet');
        sendOAuthError(res, 503, WebhookErrorCode.TEMPORARILY_UNAVAILABLE, outcome.description, {
          'retry-after': String(outcome.retryAfterSeconds),
        });
        return;
      }
      if (outcome.status === 'invalid') {
        count('rejected');
        sendOAuthError(res, 400, WebhookErrorCode.INVALID_REQUEST, outcome.description);
        return;
      }
      if (outcome.status === 'over-bound') {
        count('over-bound');
        sendOAuthError(res, 429, WebhookErrorCode.TEMPORARILY_UNAVAILABLE, outcome.description);
        return;
      }
      count(outcome.status === 'created' ? 'accepted' : outcome.status);
      res.writeHead(204, { 'cache-control': 'no-store' });
      res.end();
      await outcome.publish();
    },
  };
}
