// An identity provider for the tests: key pairs made here, a JWKS served from a local node:http server on port 0, and
// tokens signed with jose as a real provider signs them.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';

import type { GatewayOptions } from '../../src/gateway/options.js';
import { startTestGateway, type TestGateway } from './gateway.js';

export const ISSUER = 'https://idp.example.test/realms/acme';
export const AUDIENCE = 'gateway';

export interface SigningKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function signingKey(kid: string, alg = 'ES256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicJwk };
}

/** A JWKS endpoint: serves the keys it holds now; `down()` makes it answer 503, `stop()` closes it. */
export interface JwksServer {
  url: string;
  /** GET requests it has answered (or refused while down). */
  requests: number;
  keys: SigningKey[];
  down(): void;
  up(): void;
  /** Answers nothing until `release()`: a verification awaiting the keys waits as long. */
  hold(): void;
  release(): void;
  stop(): Promise<void>;
}

export async function startJwksServer(keys: SigningKey[]): Promise<JwksServer> {
  let isDown = false;
  let held: Array<() => void> | null = null;
  const state: JwksServer = {
    url: '',
    requests: 0,
    keys,
    down: () => (isDown = true),
    up: () => (isDown = false),
    hold: () => (held ??= []),
    release: () => {
      const waiting = held ?? [];
      held = null;
      for (const answer of waiting) answer();
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = http.createServer((req, res) => {
    state.requests += 1;
    const answer = () => {
      if (isDown) {
        res.writeHead(503).end();
        return;
      }
      res
        .writeHead(200, { 'content-type': 'application/jwk-set+json' })
        .end(JSON.stringify({ keys: state.keys.map((k) => k.publicJwk) }));
    };
    if (held !== null) held.push(answer);
    else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/realms/acme/protocol/openid-connect/certs`;
  return state;
}

export interface TokenOptions {
  /** Seconds since the epoch; default now + 1 h. `null`: no exp claim. */
  exp?: number | null;
  nbf?: number;
  /** Seconds since the epoch; default now. */
  iat?: number;
  iss?: string;
  aud?: string | string[];
  /** Extra claims (azp, client_id, sub, scope, scp, ...). */
  claims?: Record<string, unknown>;
  /** Header kid; default the key's. */
  kid?: string;
}

/** The scopes a key of GATEWAY_API_KEYS holds: every one but operator (a token's default in these tests). */
export const EVERY_APP_SCOPE = 'cloud:read cloud:write identity:read identity:write mobile-id:read mobile-id:write';

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export async function sign(key: SigningKey, options: TokenOptions = {}): Promise<string> {
  const jwt = new SignJWT({ azp: 'shop', scope: `openid profile ${EVERY_APP_SCOPE}`, ...options.claims })
    .setProtectedHeader({ alg: key.alg, kid: options.kid ?? key.kid, typ: 'JWT' })
    .setIssuer(options.iss ?? ISSUER)
    .setAudience(options.aud ?? AUDIENCE)
    .setIssuedAt(options.iat);
  if (options.exp !== null) jwt.setExpirationTime(options.exp ?? nowSeconds() + 3600);
  if (options.nbf !== undefined) jwt.setNotBefore(options.nbf);
  return jwt.sign(key.privateKey);
}

/** An unsigned token (`alg: none`), as an attacker would write it. */
export function unsigned(claims: Record<string, unknown>): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
}

/**
 * A gateway that accepts the JWTs of `jwks` (and the API keys of `env`, if any): by default of any app name that is no
 * configured app's (AUTH_APPS=*); `env` says otherwise.
 */
export function startJwtGateway(
  jwks: JwksServer,
  env: Record<string, string> = {},
  options: GatewayOptions = {},
): Promise<TestGateway> {
  return startTestGateway(
    { AUTH_JWKS_URL: jwks.url, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE, AUTH_APPS: '*', ...env },
    options,
  );
}

/** A clock the test moves (epoch ms). */
export function testClock(start = Date.now()): { now: () => number; advance(ms: number): void } {
  let at = start;
  return { now: () => at, advance: (ms) => (at += ms) };
}
