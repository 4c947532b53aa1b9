import { ALL_GRANTS, APP_GRANTS, indexOfDigest, OPEN_CALLER, scopeOfApp, scopeOfKeyDigest, sha256, type AppKey, type Caller } from '../caller.js';

/** The token of an `Authorization: Bearer <token>` value (scheme case-insensitive), or null. */
export function bearerToken(header: string | string[] | undefined | null): string | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return null;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(value);
  return m ? m[1]! : null;
}

/**
 * Why a request is not let in: no credentials (`missing`), credentials that are not valid (`invalid`: 401, or 4401 and
 * 4403 on graphql-ws), or a JWT whose keys the gateway could not fetch (`unavailable`: the fault is not the app's, 503).
 */
export interface AuthFailure {
  ok: false;
  reason: 'missing' | 'invalid' | 'unavailable';
  /** Says what to send, or which check failed; never repeats the credentials. */
  message: string;
}

export type AuthResult = { ok: true; caller: Caller } | AuthFailure;

/** How each transport authenticates: API keys answer at once; a JWT (src/server/jwt-auth.ts) after its verification. */
export type Authenticate = (authorization: string | string[] | undefined | null) => AuthResult | Promise<AuthResult>;

/** The JWT half: verifies a token shaped like a JWT (`looks`) that is not an API key. */
export interface JwtCheck {
  looks(token: string): boolean;
  verify(token: string): Promise<AuthResult>;
}

/**
 * Checks an app's API key (GATEWAY_API_KEYS, or OPERATOR_API_KEYS: an operator's key is also an app's key).
 * Keys are held as sha256 digests and compared in constant time; with no keys configured every caller is the
 * one `open` caller. Each configured key's caller (scope and label) is built once, here: a named key is its app
 * (`app:<name>`), a bare key its own app, labelled by `label(key)` (a keyed digest, never the key's plain hash).
 * With `jwt` (AUTH_JWKS_URL or AUTH_JWKS_FILE), a bearer token that is no key and looks like a JWT is verified as one;
 * the gateway is then never open, even without keys. An API key is answered without a promise: the key path is the hot
 * one (every benchmark runs with keys) and stays as cheap as before JWTs existed.
 */
export function createAuthenticator(apiKeys: readonly AppKey[], operatorKeys: readonly AppKey[], label: (key: string) => string, jwt?: JwtCheck): Authenticate {
  const entries = [...operatorKeys.map((k) => ({ ...k, grants: ALL_GRANTS })), ...apiKeys.map((k) => ({ ...k, grants: APP_GRANTS }))];
  const hashes = entries.map((k) => sha256(k.key));
  const callers: Caller[] = entries.map((k, i) => {
    const scope = k.name === null ? scopeOfKeyDigest(hashes[i]!) : scopeOfApp(k.name);
    const app = k.name ?? label(k.key);
    return Object.freeze({ scope, app, grants: k.grants });
  });
  const missing: AuthFailure = Object.freeze({
    ok: false,
    reason: 'missing',
    message: jwt ? 'a valid API key or JWT is required: send Authorization: Bearer <key or JWT>' : 'a valid API key is required: send Authorization: Bearer <key>',
  });
  const invalid: AuthFailure = Object.freeze({ ok: false, reason: 'invalid', message: 'the API key is not valid' });
  return (authorization) => {
    if (hashes.length === 0 && !jwt) return { ok: true, caller: OPEN_CALLER };
    const token = bearerToken(authorization);
    if (!token) return missing;
    // One digest per request; operator keys come first, so a key in both lists is the operator's.
    const found = indexOfDigest(sha256(token), hashes);
    if (found >= 0) return { ok: true, caller: callers[found]! };
    return jwt?.looks(token) ? jwt.verify(token) : invalid;
  };
}
