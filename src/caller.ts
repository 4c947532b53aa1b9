import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * The app's identity, a leaf every layer may use: who is calling (the idempotency scope and the owner of
 * what they create) and how API keys and notification tokens are held (sha256 digests, compared in
 * constant time). Transport decides who the caller is (server/auth.ts); domains only carry it.
 */
export interface Caller {
  /** `key:<first 16 hex of sha256(key)>`, or `open` when the gateway runs without keys (sandbox only). */
  readonly scope: string;
  /** An OPERATOR_API_KEYS key: may read operator data (the mobile-ID quarantine) beside its own. */
  readonly operator?: boolean;
}

export const OPEN_CALLER: Caller = Object.freeze({ scope: 'open' });

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** The caller an API key stands for. */
export function callerOfKey(key: string): Caller {
  return callerOfDigest(sha256(key));
}

/** The caller of an API key, from its sha256 digest (computed once per request by the authenticator). */
export function callerOfDigest(digest: Buffer): Caller {
  return { scope: `key:${digest.toString('hex', 0, 8)}` };
}

/** True when `candidate` is one of `hashes` (sha256 digests), comparing in constant time. */
export function matchesAnyHash(candidate: string, hashes: readonly Buffer[]): boolean {
  return matchesAnyDigest(sha256(candidate), hashes);
}

/** True when `digest` (a sha256 digest) is one of `hashes`, comparing in constant time. */
export function matchesAnyDigest(digest: Buffer, hashes: readonly Buffer[]): boolean {
  let found = false;
  for (const h of hashes) found = timingSafeEqual(digest, h) || found;
  return found;
}
