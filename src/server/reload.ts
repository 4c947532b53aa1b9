// Configuration that reloads without a restart (docs/decisions/057): on SIGHUP or POST /admin/reload the gateway reads
// its files again, all or nothing. This is the route and the outcome; the composition root (src/gateway/start.ts) says what is
// read and swaps the snapshot.
import type { IncomingMessage, ServerResponse } from 'node:http';

import { authorizationOf, type Authenticate } from '../auth/keys.js';
import { WebhookErrorCode } from '../errors.js';
import type { Route } from './http.js';
import { sendJson, sendOAuthError } from './respond.js';

/** What a reload did: every file read and swapped in, or the first bad one (nothing changed). */
export type ReloadOutcome =
  | { ok: true; files: readonly string[] }
  | {
      ok: false;
      /** The variable that names the bad file (GATEWAY_APPS_FILE, AUTH_JWKS_FILE, …). */
      variable: string;
      /** The file and the line, when the error knows them (a ConfigError's place). */
      file: string | null;
      line: number | null;
      message: string;
    };

/**
 * POST /admin/reload: the operator's way to reload without a signal (a container platform may offer none). Only a
 * caller with the `operator` scope (OPERATOR_API_KEYS, an apps-file entry with `operator`, a JWT app of
 * AUTH_OPERATOR_APPS) may: others get 401 (no or bad credentials) or 403. 200 with the files read, or 422 naming the
 * bad file and its line (the running configuration is kept).
 */
export function reloadRoute(options: { authenticate: Authenticate; reload: () => Promise<ReloadOutcome> }): Route {
  return {
    method: 'POST',
    path: '/admin/reload',
    name: 'POST /admin/reload',
    async handle(req: IncomingMessage, res: ServerResponse, ctx) {
      const result = options.authenticate(authorizationOf(req), ctx);
      const auth = result instanceof Promise ? await result : result;
      if (!auth.ok) {
        const status = auth.reason === 'unavailable' ? 503 : 401;
        sendOAuthError(
          res,
          status,
          status === 503 ? WebhookErrorCode.TEMPORARILY_UNAVAILABLE : WebhookErrorCode.INVALID_TOKEN,
          auth.message,
          status === 401 ? { 'www-authenticate': 'Bearer' } : {},
        );
        return;
      }
      ctx.app = auth.caller.app;
      if (!auth.caller.grants.has('operator')) {
        sendOAuthError(
          res,
          403,
          WebhookErrorCode.INSUFFICIENT_SCOPE,
          'reloading the configuration needs the operator scope (OPERATOR_API_KEYS, an apps-file entry with operator, or a JWT app of AUTH_OPERATOR_APPS)',
          {
            'www-authenticate': 'Bearer error="insufficient_scope", scope="operator"',
          },
        );
        return;
      }
      const outcome = await options.reload();
      if (outcome.ok) sendJson(res, 200, { reloaded: true, files: outcome.files });
      else
        sendJson(res, 422, {
          error: WebhookErrorCode.RELOAD_FAILED,
          error_description: `${outcome.message} (the running configuration is kept)`,
          variable: outcome.variable,
          file: outcome.file,
          line: outcome.line,
        });
    },
  };
}
