import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';

// canonicalize is CommonJS whose typings declare an ES default export; at run time the module is the function.
const canonicalizeFn = ((canonicalizeModule as unknown as { default?: unknown }).default ?? canonicalizeModule) as unknown as (
  input: unknown,
) => string | undefined;

/** The RFC 8785 canonical JSON of a value (undefined for a value JSON cannot hold). */
export function canonicalJson(value: unknown): string | undefined {
  return canonicalizeFn(value);
}

/**
 * sha256 of the RFC 8785 canonical JSON of a value: the same request always gives the same fingerprint.
 * Idempotency records, provisionings and the event log compare requests by it.
 */
export function fingerprint(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value) ?? 'null').digest('hex');
}
