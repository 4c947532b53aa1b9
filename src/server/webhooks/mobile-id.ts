import type { ServerResponse } from 'node:http';

import { authorizationOf, bearerToken } from '../../auth/keys.js';
import { WebhookErrorCode } from '../../errors.js';
import type { Metrics } from '../../metrics.js';
import type { RejectionReason } from '../../mobile-id/quarantine.js';
import type { MobileIdService } from '../../mobile-id/service.js';
import type { PauseAt } from '../../phases.js';
import type { Route } from '../http.js';
import { sendOAuthError } from '../respond.js';
import { formFields, readWebhookBody, type WebhookBodyOptions } from './body.js';

/** Largest notification body accepted; a real one is a few KiB. */
export const MOBILE_ID_NOTIFICATION_BODY_LIMIT = 64 * 1024;
export const MOBILE_ID_NOTIFICATION_PATH = '/webhooks/mobile-id';

/** How a notification's body is read: the spec's default is JSON; form encoding is an option of the sender's configuration. */
const bodyOptions: WebhookBodyOptions = {
  limit: MOBILE_ID_NOTIFICATION_BODY_LIMIT,
  defaultType: 'application/json',
  parserFor: (type) =>
    type === 'application/json' ? 'json' : type === 'application/x-www-form-urlencoded' ? formFields : null,
  unsupported: {
    status: 415,
    description: 'Content-Type must be application/json or application/x-www-form-urlencoded',
  },
};

/** A 204, its headers (the request id first, as `setHeader` had put it) written in one call. */
function noContent(res: ServerResponse, requestId: string): void {
  res.writeHead(204, { 'x-request-id': requestId, 'cache-control': 'no-store' });
  res.end();
}

/** Support references of the mobile identity service (spec: "Request headers"), kept short and printable. */
function supportHeader(value: string | string[] | undefined): string | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return null;
  const clean = v
    .replace(/[^\x20-\x7e]/g, '')
    .trim()
    .slice(0, 256);
  return clean || null;
}

/**
 * The notification_uri of the mobile identity service (docs/upstreams.md, Mobile-ID notification). The sender may not
 * retry, so a notification is stored durably before its 204 and published after it. Never answers 3xx.
 *
 * 401 bad or missing client_notification_token; 413 body over 64 KiB; 415 neither JSON nor form, or Content-Encoding;
 * 400 a body or id_token that fails a check (nothing stored); 409 a different notification for an
 * auth_req_id that has one (nothing changed); 429 not verifiable now and its owner has MOBILEID_PENDING_MAX_PER_APP
 * notifications pending, or the token's app has reached a storage bound (nothing stored); 204 stored, possibly
 * pending verification (or a duplicate).
 * Every refusal is kept in the quarantine (mobileIdRejections) and counted by reason: the sender does not
 * retry, so a refused notification is a lost authentication an operator must be able to explain.
 */
export function mobileIdWebhookRoute(options: {
  mobileId: MobileIdService;
  metrics: Metrics;
  /** Tests only (GATEWAY_TEST_PAUSE_AT): stops before the notification is stored, and between storing it and the 204. */
  pauseAt?: PauseAt;
}): Route {
  const count = (outcome: string) => options.metrics.webhooks.inc(['mobile-id', outcome]);
  return {
    method: 'POST',
    path: MOBILE_ID_NOTIFICATION_PATH,
    name: 'POST /webhooks/mobile-id',
    // Every answer's headers are written in one call, the request id with them (src/server/http.ts).
    writesRequestId: true,
    async handle(req, res, ctx) {
      const requestId = supportHeader(req.headers['x-mobileid-request-id']);
      const transactionId = supportHeader(req.headers['x-mobileid-transaction-id']);
      // The support references go on each line as fields, not through a child logger: a child of the
      // request's child is paid per notification, logged or not (decision 006, Measurements, step 3).
      const support = { mobileIdRequestId: requestId, mobileIdTransactionId: transactionId };
      let scope: string | null = null;
      const refuse = async (r: {
        status: number;
        error: WebhookErrorCode;
        reason: RejectionReason;
        description: string;
        authReqId?: string | null;
        /** The webhooks metric's outcome (default: rejected). */
        outcome?: string;
        /** Answer with Connection: close (the body was not read). */
        close?: boolean;
      }) => {
        const { status, error, reason, description, authReqId = null, outcome = 'rejected', close = false } = r;
        count(outcome);
        options.metrics.mobileIdRejections.inc({ reason });
        if (ctx.logs('info'))
          ctx.logger.info(
            { ...support, status, error, rejection: reason, reason: description, authReqId },
            'mobile-ID notification refused',
          );
        // Kept before the answer, so that a refusal the sender saw is always in the quarantine.
        const kept = await options.mobileId
          .reject({
            authReqId,
            httpStatus: status,
            error,
            reason,
            description,
            requestId,
            transactionId,
            gatewayRequestId: ctx.requestId,
            scope,
          })
          .catch((err: unknown) => {
            ctx.logger.error({ err }, 'a refused mobile-ID notification could not be kept in the quarantine');
            return true;
          });
        if (!kept && ctx.logs('debug'))
          ctx.logger.debug(
            { ...support },
            'unauthenticated mobile-ID requests over the quarantine limit: counted, not kept',
          );
        const id = ctx.requestId;
        sendOAuthError(
          res,
          status,
          error,
          description,
          close ? { 'x-request-id': id, connection: 'close' } : { 'x-request-id': id },
        );
      };

      // Authenticated before the body is read: a forged request costs one hash and at most one lookup.
      // Two Authorization headers are no token (a proxy in front may read the other one): 401, as on every route.
      const auth = await options.mobileId.authenticate(bearerToken(authorizationOf(req)));
      if (!auth.ok) {
        // An expired token of an app's is that app's refusal; anything else is an outsider's (its own bucket).
        scope = auth.expired?.scope ?? null;
        return refuse({
          status: 401,
          error: WebhookErrorCode.INVALID_TOKEN,
          reason: 'UNAUTHORIZED',
          description: auth.description,
          authReqId: auth.expired?.authReqId ?? null,
          outcome: 'unauthorized',
          close: true,
        });
      }
      scope = auth.scope;

      const read = await readWebhookBody(req, bodyOptions);
      if (!read.ok)
        return refuse({
          status: read.status,
          error: read.error,
          reason: read.reason,
          description: read.description,
          close: read.close,
        });
      const { body, type } = read;

      if (options.pauseAt) await options.pauseAt('webhook-received');
      const result = await options.mobileId.receive(auth, body, {
        requestId,
        transactionId,
        contentType: type,
        gatewayRequestId: ctx.requestId,
      });
      switch (result.status) {
        case 'unauthorized':
          return refuse({
            status: 401,
            error: WebhookErrorCode.INVALID_TOKEN,
            reason: 'UNAUTHORIZED',
            description: result.description,
            authReqId: result.authReqId,
            outcome: 'unauthorized',
          });
        case 'invalid':
          return refuse({
            status: 400,
            error: WebhookErrorCode.INVALID_REQUEST,
            reason: result.reason,
            description: result.description,
            authReqId: result.authReqId,
          });
        case 'pending':
          // Stored durably; delivered once the id_token is verified (docs/decisions/040). Never "try again".
          count('pending');
          noContent(res, ctx.requestId);
          return;
        case 'over-limit':
          // The sender does not retry: this authentication is lost, so it is kept in the quarantine with its reason.
          return refuse({
            status: 429,
            error: WebhookErrorCode.TEMPORARILY_UNAVAILABLE,
            reason: 'PENDING_LIMIT',
            description: result.description,
            authReqId: result.authReqId,
            outcome: 'over-limit',
          });
        case 'over-bound':
          // The token's app has stored its bound (src/store/app-storage.ts): nothing stored, kept in the quarantine.
          return refuse({
            status: 429,
            error: WebhookErrorCode.TEMPORARILY_UNAVAILABLE,
            reason: 'STORAGE_BOUND',
            description: result.refusal.description,
            authReqId: result.authReqId,
            outcome: 'over-bound',
          });
        case 'conflict':
          ctx.logger.warn(
            { ...support, authReqId: result.authReqId },
            'mobile-ID notification differs from the one already stored for its auth_req_id; kept the first',
          );
          return refuse({
            status: 409,
            error: WebhookErrorCode.INVALID_REQUEST,
            reason: 'CONFLICT',
            description: 'a different notification was already received for this auth_req_id',
            authReqId: result.authReqId,
            outcome: 'conflict',
          });
        case 'duplicate':
          count('duplicate');
          if (ctx.logs('info'))
            ctx.logger.info(
              { ...support, authReqId: result.authReqId },
              'mobile-ID notification received again; acknowledged, not published again',
            );
          noContent(res, ctx.requestId);
          return;
        case 'accepted':
          if (options.pauseAt) await options.pauseAt('webhook-stored');
          count('accepted');
          // The request's child logger is made only when a line is written (not at LOG_LEVEL=warn).
          if (ctx.logs('info'))
            ctx.logger.info(
              { ...support, authReqId: result.authReqId, outcome: result.outcome },
              'mobile-ID notification stored',
            );
          noContent(res, ctx.requestId);
          await result.publish();
          return;
      }
    },
  };
}
