import { hash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';

// canonicalize is CommonJS whose typings declare an ES default export; at run time the module is the function.
const canonicalizeFn = ((canonicalizeModule as unknown as { default?: unknown }).default ??
  canonicalizeModule) as unknown as (input: unknown) => string | undefined;

/**
 * The RFC 8785 canonical JSON of a value (undefined for a value JSON cannot hold): exactly the canonicalize package's
 * text (test/fingerprint.test.ts holds them equal), which fingerprints and dedupe keys already stored were made with.
 * Plain JSON (strings, finite numbers, booleans, null, arrays and objects) is written here, without the package's
 * copy per sort and string per member that every mutation's fingerprint allocated; any other value (a toJSON, a
 * number JSON cannot write, a function, a bigint) is the package's, wherever it sits.
 */
export function canonicalJson(value: unknown): string | undefined {
  return write(value);
}

function write(value: unknown): string | undefined {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : canonicalizeFn(value);
    case 'object':
      break;
    default:
      return canonicalizeFn(value);
  }
  if ((value as { toJSON?: unknown }).toJSON instanceof Function) return canonicalizeFn(value);
  if (Array.isArray(value)) {
    // As the package's reduce: a hole is skipped, and every element but the one at index 0 is preceded by a comma.
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) continue;
      const e: unknown = value[i];
      if (i !== 0) out += ',';
      out += e === undefined || typeof e === 'symbol' ? 'null' : write(e);
    }
    return out + ']';
  }
  const object = value as Record<string, unknown>;
  const keys = sortedKeys(object);
  let out = '{';
  for (const k of keys) {
    const v = object[k];
    if (v === undefined || typeof v === 'symbol') continue;
    if (out.length > 1) out += ',';
    out += quoted(k) + ':' + write(v);
  }
  return out + '}';
}

/** Object.keys in UTF-16 code unit order (Array.prototype.sort's default), sorted in place when there are few. */
function sortedKeys(object: object): string[] {
  const keys = Object.keys(object);
  if (keys.length > 16) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > k) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = k;
  }
  return keys;
}

/** JSON.stringify of short keys, kept: the same few keys recur in every request. Bounded in count and length. */
const quotedKeys = new Map<string, string>();

function quoted(key: string): string {
  let q = quotedKeys.get(key);
  if (q === undefined) {
    q = JSON.stringify(key);
    if (key.length <= 64 && quotedKeys.size < 4096) quotedKeys.set(key, q);
  }
  return q;
}

/**
 * sha256 of the RFC 8785 canonical JSON of a value: the same request always gives the same fingerprint.
 * Idempotency records, provisionings and the event log compare requests by it.
 */
export function fingerprint(value: unknown): string {
  // One-shot: no Hash object made per call.
  return hash('sha256', canonicalJson(value) ?? 'null', 'hex');
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
