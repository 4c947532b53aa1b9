import { callerOfDigest, matchesAnyDigest, OPEN_CALLER, sha256, type Caller } from '../caller.js';

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
 * one `open` caller.
 */
export function createAuthenticator(
  apiKeys: readonly string[],
  operatorKeys: readonly string[] = [],
): (authorization: string | string[] | undefined | null) => AuthResult {
  const hashes = apiKeys.map(sha256);
  const operatorHashes = operatorKeys.map(sha256);
  return (authorization) => {
    if (hashes.length === 0) return { ok: true, caller: OPEN_CALLER };
    const token = bearerToken(authorization);
    if (!token) return { ok: false, reason: 'missing' };
    // One digest per request: the comparisons and the caller's scope all derive from it.
    const digest = sha256(token);
    const operator = operatorHashes.length > 0 && matchesAnyDigest(digest, operatorHashes);
    if (!operator && !matchesAnyDigest(digest, hashes)) return { ok: false, reason: 'invalid' };
    const caller = callerOfDigest(digest);
    return { ok: true, caller: operator ? { ...caller, operator: true } : caller };
  };
}
