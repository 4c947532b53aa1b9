import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';

// canonicalize is CommonJS whose typings declare an ES default export; at run time the module is the function.
const canonicalizeFn = ((canonicalizeModule as unknown as { default?: unknown }).default ??
  canonicalizeModule) as unknown as (input: unknown) => string | undefined;

/** The RFC 8785 canonical JSON of a value (undefined for a value JSON cannot hold). */
export function canonicalJson(value: unknown): string | undefined {
  return canonicalizeFn(value);
}

/**
 * sha256 of the RFC 8785 canonical JSON of a value: the same request always gives the same fingerprint.
 * Idempotency records, provisionings and the event log compare requests by it.
 */
export function fingerprint(value: unknown): string {
  return createHash('sha256')
    .update(canonicalJson(value) ?? 'null')
    .digest('hex');
}

/**
 * A keyed digest (the gateway secret's HMAC, `digest`) of the RFC 8785 canonical JSON of a value: what is stored to
 * compare requests that hold personal data or passwords (an rfm check's names, a Kafka user's password). An
 * unsalted hash of a short, guessable value can be tested offline by whoever reads the database; this one cannot
 * without the secret.
 */
export function keyedFingerprint(digest: (text: string) => string, value: unknown): string {
  return digest(`request-fingerprint\u0000${canonicalJson(value) ?? 'null'}`);
}

/**
 * True when `stored` is the fingerprint of `value`: its keyed one, or the unsalted one stored before fingerprints
 * were keyed (a retry with an older record's key is still the same request, not a reuse).
 */
export function sameRequest(stored: string, keyed: string, value: unknown): boolean {
  return stored === keyed || (stored.length === 64 && stored === fingerprint(value));
}
