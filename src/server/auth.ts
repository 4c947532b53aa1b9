import { createHash, timingSafeEqual } from 'node:crypto';

/** Who is calling: the idempotency scope and the owner of what they create. */
export interface Caller {
  /** `key:<first 16 hex of sha256(key)>`, or `open` when the gateway runs without keys (sandbox only). */
  readonly scope: string;
}

export const OPEN_CALLER: Caller = Object.freeze({ scope: 'open' });

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** The token of an `Authorization: Bearer <token>` value (scheme case-insensitive), or null. */
export function bearerToken(header: string | string[] | undefined | null): string | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return null;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(value);
  return m ? m[1]! : null;
}

/** True when `candidate` is one of `hashes` (sha256 digests), comparing in constant time. */
export function matchesAnyHash(candidate: string, hashes: readonly Buffer[]): boolean {
  const digest = sha256(candidate);
  let found = false;
  for (const h of hashes) found = timingSafeEqual(digest, h) || found;
  return found;
}

export type AuthResult = { ok: true; caller: Caller } | { ok: false; reason: 'missing' | 'invalid' };

/**
 * Checks an app's API key (GATEWAY_API_KEYS). Keys are held as sha256 digests and compared in constant
 * time; with no keys configured every caller is the one `open` caller.
 */
export function createAuthenticator(apiKeys: readonly string[]): (authorization: string | string[] | undefined | null) => AuthResult {
  const hashes = apiKeys.map(sha256);
  return (authorization) => {
    if (hashes.length === 0) return { ok: true, caller: OPEN_CALLER };
    const token = bearerToken(authorization);
    if (!token) return { ok: false, reason: 'missing' };
    if (!matchesAnyHash(token, hashes)) return { ok: false, reason: 'invalid' };
    return { ok: true, caller: { scope: `key:${sha256(token).toString('hex').slice(0, 16)}` } };
  };
}
