// Embedded simulator of the mobile identity service's side of docs/upstreams.md, Mobile-ID notification: a signing
// key with its JWKS on loopback HTTP, and the completion notification it POSTs to a notification_uri.
// Written from the spec and OpenID CIBA alone: it imports nothing from the gateway (src/mobile-id, ...).
//
// What the spec leaves open and the sandbox decides:
// - the id_token is an ES256 JWS with iss (the sandbox URL), aud (SANDBOX_MOBILEID_CLIENT_ID), sub, acr,
//   amr, iat, exp, auth_time, at_hash and urn:openid:params:jwt:claim:auth_req_id (CIBA Core §10.3.1);
// - bodies carry the extra fields real senders add: jwks_endpoint, premiuminfo_endpoint, kyc_match_endpoint;
// - failures are the rows of the spec's error table, verbatim.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';

import { requestPath, sendJson, startLoopbackServer } from './http.js';

/** The `aud` of sandbox id_tokens: the service provider's client id at the mobile identity service. */
export const SANDBOX_MOBILEID_CLIENT_ID = 'sandbox-service-provider';
export const JWKS_PATH = '/.well-known/jwks.json';

/** The spec's error table ("Errors"), row by row. */
export const MOBILEID_FAILURES = {
  CLIENT_TIMEOUT: { error: 'access_denied', error_description: 'client timeout' },
  CANCELLED_BY_USER: { error: 'access_denied', error_description: 'the client cancelled the authentication' },
  AUTHENTICATION_ERROR: { error: 'access_denied', error_description: 'error authentication' },
  SMS_ATTEMPTS_EXHAUSTED: {
    error: 'access_denied',
    error_description: 'the client has run out of attempts to authorize by sms code',
  },
  HHE_REQUEST_FAILED: { error: 'access_denied', error_description: 'HHE request failed' },
  LOGIN_HINT_MISMATCH: { error: 'access_denied', error_description: 'Login hint doesn’t match' },
  SERVER_ERROR: { error: 'server_error', error_description: 'internal Server Error' },
} as const;

export type MobileIdSandboxOutcome = 'SUCCESS' | keyof typeof MOBILEID_FAILURES;

export interface NotificationOptions {
  authReqId: string;
  outcome?: MobileIdSandboxOutcome;
  /** Defaults: a fresh random access token, 3600 s, a stable pseudonymous sub per auth_req_id. */
  accessToken?: string;
  expiresIn?: number;
  sub?: string;
  correlationId?: string;
  /** Claims added to (or replacing) the id_token's; `undefined` values remove a claim. */
  claims?: Record<string, unknown>;
  /** Body fields added to (or replacing) the notification's; `undefined` values remove a field. */
  fields?: Record<string, unknown>;
}

export interface SandboxNotification {
  body: Record<string, unknown>;
  /** X-Mobileid-Request-Id and X-Mobileid-Transaction-Id. */
  headers: Record<string, string>;
}

export interface MobileIdSandbox {
  readonly url: string;
  readonly jwksUrl: string;
  /** `iss` of its id_tokens. */
  readonly issuer: string;
  readonly clientId: string;
  readonly notificationToken: string;
  /** How many times the JWKS was fetched. */
  readonly jwksRequests: number;
  /** Signs claims as an id_token with the sandbox key (ES256, with kid). */
  signIdToken(claims: Record<string, unknown>): Promise<string>;
  /** The notification the service would send, not sent. */
  buildNotification(options: NotificationOptions): Promise<SandboxNotification>;
  /** Builds a notification and POSTs it to `notificationUri` with `Authorization: Bearer <token>`. */
  notify(
    options: NotificationOptions & { notificationUri: string; token: string; contentType?: 'json' | 'form' },
  ): Promise<{ status: number; body: string; notification: SandboxNotification }>;
  close(): Promise<void>;
}

/** base64url of the left half of SHA-256(access_token): at_hash for ES256 (OpenID Connect Core §3.3.2.11). */
function atHashEs256(accessToken: string): string {
  return createHash('sha256').update(accessToken, 'ascii').digest().subarray(0, 16).toString('base64url');
}

/**
 * `notificationToken` is the client_notification_token the sandboxed gateway accepts from whoever holds it (a
 * secret of its data directory, shown at start-up); random when not given.
 */
export async function startMobileIdSandbox(options: { notificationToken?: string } = {}): Promise<MobileIdSandbox> {
  const notificationToken = options.notificationToken ?? randomBytes(24).toString('base64url');
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const publicJwk: JWK = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk);
  const jwks = { keys: [{ ...publicJwk, kid, alg: 'ES256', use: 'sig' }] };
  let jwksRequests = 0;

  const server = await startLoopbackServer((req, res) => {
    if (req.method === 'GET' && requestPath(req) === JWKS_PATH) {
      jwksRequests += 1;
      sendJson(res, 200, jwks, { 'cache-control': 'max-age=3600' });
      return;
    }
    sendJson(res, 404, { error: 'not_found', error_description: 'the mobile-ID sandbox serves only its JWKS' });
  });
  const issuer = server.url;

  const signIdToken = (claims: Record<string, unknown>) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' }).sign(privateKey);

  const buildNotification = async (o: NotificationOptions): Promise<SandboxNotification> => {
    const headers = { 'x-mobileid-request-id': randomUUID(), 'x-mobileid-transaction-id': randomUUID() };
    const outcome = o.outcome ?? 'SUCCESS';
    let body: Record<string, unknown>;
    if (outcome !== 'SUCCESS') {
      body = { auth_req_id: o.authReqId, ...MOBILEID_FAILURES[outcome] };
    } else {
      const accessToken = o.accessToken ?? randomBytes(32).toString('base64url');
      const now = Math.floor(Date.now() / 1000);
      const claims: Record<string, unknown> = {
        iss: issuer,
        aud: SANDBOX_MOBILEID_CLIENT_ID,
        sub: o.sub ?? createHash('sha256').update(`sandbox-sub:${o.authReqId}`).digest('hex').slice(0, 32),
        acr: '2',
        amr: ['SIM_PIN'],
        iat: now,
        auth_time: now,
        exp: now + 600,
        at_hash: atHashEs256(accessToken),
        'urn:openid:params:jwt:claim:auth_req_id': o.authReqId,
        ...o.claims,
      };
      for (const [k, v] of Object.entries(claims)) if (v === undefined) delete claims[k];
      body = {
        auth_req_id: o.authReqId,
        access_token: accessToken,
        token_type: 'Bearer',
        id_token: await signIdToken(claims),
        expires_in: o.expiresIn ?? 3600,
        jwks_endpoint: `${server.url}${JWKS_PATH}`,
        premiuminfo_endpoint: `${server.url}/premiuminfo`,
        kyc_match_endpoint: `${server.url}/kyc-match-split`,
      };
    }
    if (o.correlationId !== undefined) body.correlation_id = o.correlationId;
    for (const [k, v] of Object.entries(o.fields ?? {})) {
      if (v === undefined) delete body[k];
      else body[k] = v;
    }
    return { body, headers };
  };

  return {
    url: server.url,
    jwksUrl: `${server.url}${JWKS_PATH}`,
    issuer,
    clientId: SANDBOX_MOBILEID_CLIENT_ID,
    notificationToken,
    get jwksRequests() {
      return jwksRequests;
    },
    signIdToken,
    buildNotification,
    async notify(o) {
      const notification = await buildNotification(o);
      const form = o.contentType === 'form';
      const payload = form
        ? new URLSearchParams(Object.entries(notification.body).map(([k, v]) => [k, String(v)])).toString()
        : JSON.stringify(notification.body);
      // undici's whole API only when a notification is sent (docs/decisions/124).
      const { request } = await import('undici');
      const res = await request(o.notificationUri, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${o.token}`,
          'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json',
          ...notification.headers,
        },
        body: payload,
      });
      return { status: res.statusCode, body: await res.body.text(), notification };
    },
    close: () => server.close(),
  };
}
