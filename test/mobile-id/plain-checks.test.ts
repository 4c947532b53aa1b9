// MOBILEID_PLAIN_CHECKS (docs/decisions/158): a notification whose every field is as the wire shape takes it is checked
// by plain code, the rest by the zod schemas. The two must answer the same for every body: the same notification,
// field for field and in the same order (the unknown fields are kept, sealed, and shown to apps in that order), or the
// same refusal. Generated bodies mix good and bad values of every field, unknown fields and orders.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { parseNotification, plainFailure, plainSuccess } from '../../src/mobile-id/wire.js';

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const JWT = `${b64({ alg: 'RS256', kid: 'k' })}.${b64({ sub: 'user-1', iss: 'https://op.example' })}.sig`;
const JWE = `${b64({ alg: 'dir', enc: 'A256GCM' })}..iv.ct.tag`;

/** A value for a field: mostly good, sometimes at or past a limit, of another type, or absent. */
const maybe = <T>(good: fc.Arbitrary<T>) =>
  fc.oneof(
    { weight: 6, arbitrary: good },
    {
      weight: 1,
      arbitrary: fc.constantFrom<unknown>(null, '', ' ', 0, -1, 1.5, true, [], {}, 'x'.repeat(513), 'y'.repeat(4097)),
    },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );

const unknownFields = fc.dictionary(
  fc.constantFrom('jwks_endpoint', 'vendor', 'zz', 'aa', '10', '__proto__', 'constructor'),
  fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.dictionary(fc.string(), fc.string())),
);

const success = fc.record({
  auth_req_id: maybe(fc.oneof(fc.uuid(), fc.string({ minLength: 1, maxLength: 512 }), fc.integer())),
  access_token: maybe(fc.string({ minLength: 1, maxLength: 40 })),
  token_type: maybe(fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Basic')),
  id_token: maybe(fc.constantFrom(JWT, JWE, 'not-a-jwt')),
  expires_in: maybe(
    fc.oneof(fc.integer({ min: 0, max: 400_000_000 }), fc.constantFrom('3600', 315_360_000, 315_360_001)),
  ),
  jwks_uri: maybe(fc.constantFrom('https://op.example/jwks', 'http://op.example/jwks', 'javascript:x', 'not a url')),
  leading_kyc_match: maybe(fc.constantFrom(true, false, 1, '0', 'yes')),
  correlation_id: maybe(fc.oneof(fc.string({ maxLength: 20 }), fc.integer())),
});

const failure = fc.record({
  auth_req_id: maybe(fc.oneof(fc.uuid(), fc.integer())),
  error: maybe(fc.constantFrom('access_denied', 'expired_token', 'x'.repeat(512))),
  error_description: maybe(fc.oneof(fc.string({ maxLength: 30 }), fc.constant('d'.repeat(4096)))),
  correlation_id: maybe(fc.oneof(fc.string({ maxLength: 20 }), fc.integer())),
});

/** A body of the fields given (undefined: absent) and unknown ones, its keys in a shuffled order. */
const bodyOf = (known: fc.Arbitrary<Record<string, unknown>>) =>
  fc.tuple(known, unknownFields, fc.integer()).map(([fields, extra, seed]) => {
    const entries = [...Object.entries(fields).filter(([, v]) => v !== undefined), ...Object.entries(extra)];
    entries.sort((a, b) => ((a[0].length * 31 + seed) % 7) - ((b[0].length * 31 + seed) % 7));
    const body: Record<string, unknown> = {};
    for (const [k, v] of entries)
      Object.defineProperty(body, k, { value: v, enumerable: true, writable: true, configurable: true });
    return body;
  });

/** What a parse gave, with every key order kept (JSON text), and the errors' descriptions. */
const seen = (body: unknown, plain: boolean) => JSON.stringify(parseNotification(body, plain));

describe('the plain checks of a mobile-ID notification (MOBILEID_PLAIN_CHECKS)', () => {
  it('answer every generated success body as the zod schemas do, field for field and in order', () => {
    fc.assert(
      fc.property(bodyOf(success), (body) => {
        expect(seen(body, true)).toBe(seen(body, false));
      }),
      { numRuns: 3000 },
    );
  });

  it('answer every generated failure body as the zod schemas do', () => {
    fc.assert(
      fc.property(bodyOf(failure), (body) => {
        expect(seen(body, true)).toBe(seen(body, false));
      }),
      { numRuns: 3000 },
    );
  });

  it('take the common bodies themselves, and leave to zod what they do not check', () => {
    const common = { auth_req_id: 'a-1', access_token: 'at', token_type: 'Bearer', id_token: JWT, expires_in: 3600 };
    expect(plainSuccess({ ...common, vendor: 1 })).toEqual({ ...common, vendor: 1 });
    expect(plainSuccess({ ...common, correlation_id: 'c', leading_kyc_match: true })).not.toBeNull();
    expect(
      plainFailure({ auth_req_id: 'a-2', error: 'access_denied', error_description: 'Client timeout' }),
    ).not.toBeNull();
    // A field named __proto__ is kept as the body's own field, as any other unknown field.
    const proto = JSON.parse(`{"__proto__":{"x":1},${JSON.stringify(common).slice(1)}`) as Record<string, unknown>;
    expect(JSON.stringify(plainSuccess(proto))).toBe(JSON.stringify({ ...common, ...proto }));
    expect(Object.getPrototypeOf(plainSuccess(proto))).toBe(Object.prototype);
    // A URL, and anything out of shape, go to zod.
    expect(plainSuccess({ ...common, jwks_uri: 'https://op.example/jwks' })).toBeNull();
    expect(plainSuccess({ ...common, expires_in: 1.5 })).toBeNull();
    expect(plainFailure({ auth_req_id: 'a-3', error: '', error_description: 'd' })).toBeNull();
  });
});
