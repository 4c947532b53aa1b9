import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, type Client } from 'graphql-ws';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { request } from 'undici';
import WebSocket from 'ws';

import { decodeKey } from '../../src/config/index.js';
import { openAccessToken, type StoredSuccess } from '../../src/mobile-id/stored.js';
import { SecretBox } from '../../src/secret.js';
import type { TestGateway } from './gateway.js';

export const RESULT_FIELDS = `
  __typename
  ... on MobileIdAuthenticated {
    authReqId subject acr amr issuer accessToken tokenType expiresAt idToken idTokenVerified jwksUri
    idTokenChecks { signature issuer audience expiry authReqIdClaim atHash strict }
    leadingKycMatch correlationId requestId transactionId receivedAt otherFields
  }
  ... on MobileIdAuthenticationFailed {
    authReqId error errorDescription reason correlationId requestId transactionId receivedAt otherFields
  }`;

export const QUERY = `query($id: String!) { mobileIdAuthentication(authReqId: $id) { ${RESULT_FIELDS} } }`;
export const SUBSCRIPTION = `subscription($id: String!) { mobileIdAuthentication(authReqId: $id) { ${RESULT_FIELDS} } }`;

export interface WebhookResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

/** POST /webhooks/mobile-id. `body` is sent as JSON unless it is a string; `token: null` sends no Authorization. */
export async function postNotification(
  gw: TestGateway,
  body: unknown,
  options: { token?: string | null; contentType?: string; headers?: Record<string, string> } = {},
): Promise<WebhookResponse> {
  const token = options.token === undefined ? gw.gateway.sandbox.mobileId?.notificationToken : options.token;
  const res = await request(`${gw.url}/webhooks/mobile-id`, {
    method: 'POST',
    headers: {
      'content-type': options.contentType ?? 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(options.headers ?? {}),
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.body.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

/**
 * A graphql-ws client of the gateway; the key goes in connectionParams, or in the upgrade's Authorization header.
 * `operationId`: the id of its one operation (graphql-ws's message id), which the gateway's log lines of it name.
 */
export function wsClient(
  gw: TestGateway,
  options: { key?: string; keyIn?: 'params' | 'header'; operationId?: string } = {},
): Client {
  const headers = options.key && options.keyIn === 'header' ? { authorization: `Bearer ${options.key}` } : undefined;
  class HeaderWebSocket extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, headers ? { headers } : {});
    }
  }
  return createClient({
    url: gw.url.replace(/^http/, 'ws') + '/graphql',
    webSocketImpl: HeaderWebSocket,
    connectionParams: options.key && options.keyIn !== 'header' ? { authorization: `Bearer ${options.key}` } : {},
    retryAttempts: 0,
    lazy: true,
    ...(options.operationId !== undefined ? { generateID: () => options.operationId! } : {}),
  });
}

export interface Collected {
  results: any[];
  errors: unknown[];
  /** Resolves when the server completes the subscription (or it errors). */
  done: Promise<void>;
  completed(): boolean;
  stop(): void;
}

/** What graphql-ws's and graphql-sse's clients both offer. */
interface Subscribes {
  subscribe(
    payload: { query: string; variables: Record<string, unknown> },
    sink: { next(value: any): void; error(error: unknown): void; complete(): void },
  ): () => void;
}

/** Subscribes (graphql-ws or graphql-sse client) and records every `next` payload. */
export function collect(client: Client | Subscribes, query: string, variables: Record<string, unknown>): Collected {
  const results: any[] = [];
  const errors: unknown[] = [];
  let completed = false;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const stop = client.subscribe(
    { query, variables },
    {
      next: (v) => results.push(v),
      error: (e) => {
        errors.push(e);
        resolveDone();
      },
      complete: () => {
        completed = true;
        resolveDone();
      },
    },
  );
  return { results, errors, done, completed: () => completed, stop };
}

/** Rows of the event log for an auth_req_id, straight from the store. */
export async function storedEvents(
  gw: TestGateway,
  authReqId?: string,
): Promise<
  Array<{ key: string; payload: string; meta: string; scope: string | null; secrets_expire_at: number | null }>
> {
  let q = gw.gateway.services.store.db
    .selectFrom('events')
    .select(['key', 'payload', 'meta', 'scope', 'secrets_expire_at'])
    .where('kind', '=', 'mobile-id');
  if (authReqId !== undefined) q = q.where('key', '=', authReqId);
  return q.execute();
}

/**
 * The access token a stored row still holds, opened with the gateway's key (`TOKEN_ENCRYPTION_KEY`, base64 or hex)
 * wherever its version keeps it, whether or not it has expired; null once the secrets sweep removed it.
 */
export function storedAccessToken(key: string, row: { payload: string; scope: string | null }): string | null {
  const box = new SecretBox(decodeKey(key)!);
  return openAccessToken(box, JSON.parse(row.payload) as StoredSuccess, row.scope);
}

/** The issuer and client id of the operator's id_tokens (`signedNotification`), for MOBILEID_ISSUER and _AUDIENCE. */
export const OPERATOR_ISSUER = 'https://mobileid.operator.example';
export const OPERATOR_CLIENT_ID = 'sp-client-1';

/** The operator's JWKS over loopback HTTP (one ES256 key, kid `op-1`), down (503) until the test brings it up. */
export async function operatorJwks() {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'op-1', alg: 'ES256', use: 'sig' }] };
  let up = false;
  const server = http.createServer((_req, res) => {
    if (!up) {
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    setUp: (v: boolean) => void (up = v),
    privateKey,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/**
 * A success notification whose id_token `key` signs for the operator (OPERATOR_ISSUER, OPERATOR_CLIENT_ID): its
 * auth_req_id claim, at_hash, acr 3, five minutes to its exp.
 */
export async function signedNotification(
  key: CryptoKey,
  authReqId: string,
  options: { kid?: string; sub?: string } = {},
) {
  const accessToken = randomBytes(24).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    iss: OPERATOR_ISSUER,
    aud: OPERATOR_CLIENT_ID,
    sub: options.sub ?? 'pcr-123',
    acr: '3',
    iat: now,
    exp: now + 300,
    at_hash: createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url'),
    'urn:openid:params:jwt:claim:auth_req_id': authReqId,
  };
  const idToken = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: options.kid ?? 'op-1' }).sign(key);
  return {
    auth_req_id: authReqId,
    access_token: accessToken,
    token_type: 'Bearer',
    id_token: idToken,
    expires_in: 3600,
  };
}
