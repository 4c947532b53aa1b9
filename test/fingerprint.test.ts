import canonicalizeModule from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { canonicalJson } from '../src/fingerprint.js';

/**
 * Request fingerprints, callback and notification dedupe keys are digests of canonicalJson's text, stored: the text must
 * stay the canonicalize package's, byte for byte, for every value, or a retry after an upgrade would read as another
 * request (IDEMPOTENCY_KEY_REUSED) and a duplicate notification as a new one.
 */
const canonicalize = ((canonicalizeModule as unknown as { default?: unknown }).default ??
  canonicalizeModule) as unknown as (input: unknown) => string | undefined;

/** The package's answer, or the message of what it threw. */
function reference(value: unknown): { text: string | undefined } | { error: string } {
  try {
    return { text: canonicalize(value) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

function ours(value: unknown): { text: string | undefined } | { error: string } {
  try {
    return { text: canonicalJson(value) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** Keys that sort differently by code unit than by code point or locale, and keys that look like array indexes. */
const key = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.constantFrom('10', '9', '0', 'a', 'B', 'é', '\ud83d\ude00', '\uffff', 'vendor.extensions.network', ''),
);

const { value } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.double(),
    fc.integer(),
    fc.constantFrom(-0, 1e21, 1e-7, Number.MAX_VALUE, Number.NaN, Infinity, -Infinity),
    fc.string({ unit: 'binary' }),
    fc.constant(undefined),
    fc.constant(Symbol('s')),
    fc.constant(() => 1),
    fc.bigInt(),
    fc.date({ noInvalidDate: true }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.array(tie('value'), { maxLength: 4 }).map((a) => {
      const sparse = [...a];
      if (sparse.length > 1) delete sparse[0];
      return sparse;
    }),
    fc.dictionary(key, tie('value'), { maxKeys: 6 }),
    fc.dictionary(key, tie('value'), { minKeys: 17, maxKeys: 24 }),
    tie('value').map((v) => ({ toJSON: () => v })),
  ),
}));

describe('canonicalJson', () => {
  it("writes the canonicalize package's text for any value, and throws where it throws", () => {
    fc.assert(
      fc.property(value, (v) => {
        expect(ours(v)).toEqual(reference(v));
      }),
      { numRuns: 5000 },
    );
  });

  it('writes what JSON.parse reads back the same as the package, for any JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(canonicalJson(v)).toBe(canonicalize(v));
      }),
      { numRuns: 3000 },
    );
  });

  it('orders keys by UTF-16 code units, index-like keys too, and leaves out undefined members', () => {
    expect(canonicalJson({ b: 1, a: [undefined, 2], 10: 'x', 9: 'y', é: true, z: undefined })).toBe(
      '{"10":"x","9":"y","a":[null,2],"b":1,"é":true}',
    );
  });
});
