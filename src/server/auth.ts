import { ALL_GRANTS, APP_GRANTS, indexOfDigest, OPEN_CALLER, scopeOfApp, scopeOfKeyDigest, sha256, type AppKey, type Caller } from '../caller.js';

/** The token of an `Authorization: Bearer <token>` value (scheme case-insensitive), or null. */
export function bearerToken(header: string | string[] | undefined | null): string | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return null;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(value);
  return m ? m[1]! : null;
}

export type AuthResult = { ok: true; caller: Caller } | { ok: false; reason: 'missing' | 'invalid' };

/**
 * Checks an app's API key (GATEWAY_API_KEYS, or OPERATOR_API_KEYS: an operator's key is also an app's key).
 * Keys are held as sha256 digests and compared in constant time; with no keys configured every caller is the
 * one `open` caller. Each configured key's caller (scope and label) is built once, here: a named key is its app
 * (`app:<name>`), a bare key its own app, labelled by `label(key)` (a keyed digest, never the key's plain hash).
 */
export function createAuthenticator(
  apiKeys: readonly AppKey[],
  operatorKeys: readonly AppKey[],
  label: (key: string) => string,
): (authorization: string | string[] | undefined | null) => AuthResult {
  const entries = [...operatorKeys.map((k) => ({ ...k, grants: ALL_GRANTS })), ...apiKeys.map((k) => ({ ...k, grants: APP_GRANTS }))];
  const hashes = entries.map((k) => sha256(k.key));
  const callers: Caller[] = entries.map((k, i) => {
    const scope = k.name === null ? scopeOfKeyDigest(hashes[i]!) : scopeOfApp(k.name);
    const app = k.name ?? label(k.key);
    return Object.freeze({ scope, app, grants: k.grants });
  });
  return (authorization) => {
    if (hashes.length === 0) return { ok: true, caller: OPEN_CALLER };
    const token = bearerToken(authorization);
    if (!token) return { ok: false, reason: 'missing' };
    // One digest per request; operator keys come first, so a key in both lists is the operator's.
    const found = indexOfDigest(sha256(token), hashes);
    return found < 0 ? { ok: false, reason: 'invalid' } : { ok: true, caller: callers[found]! };
  };
}
