import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  checkRequest,
  headerValueArb,
  junkArb,
  SECRET_RE,
  secretArb,
  send,
  watchUnhandledRejections,
} from '../helpers/fuzz.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/** Cases per property: enough to reach every branch of the intake, few enough to keep `npm test` to minutes. */
export const WEBHOOK_RUNS = { mobileId: 1000, verification: 500 } as const;

const KEY = 'fuzz-app-key-0123456789abcdef';
const unhandled = watchUnhandledRejections();
let gw: TestGateway;
let notificationToken: string;
let callbackPath: string;
let externalId: string;

beforeAll(async () => {
  // The sandbox never calls back during the run (the store must only change through the fuzzed requests).
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY, SANDBOX_CALLBACK_DELAY_MS: '600000', LOG_LEVEL: 'debug' });
  notificationToken = gw.gateway.sandbox.mobileId!.notificationToken;
  const res = await gw.graphql(
    `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`,
    {
      input: { workflowId: 'wf-fuzz', applicant: { lastName: 'Fuzz' } },
    },
    { key: KEY },
  );
  expect(res.errors).toBeUndefined();
  externalId = res.data!.registerVerification.verification.externalId;
  const v = gw.gateway.sandbox.verification!.verifications().find((x) => x.externalId === externalId)!;
  callbackPath = new URL(v.callbackUrl!).pathname;
});
afterAll(() => gw.close());

/** A JWT-shaped string whose signature part is a secret. */
const jwtLikeArb = fc
  .tuple(fc.jsonValue({ maxDepth: 1 }), fc.jsonValue({ maxDepth: 1 }), secretArb('IDT'))
  .map(
    ([h, c, sig]) =>
      `${Buffer.from(JSON.stringify(h) ?? 'null').toString('base64url')}.${Buffer.from(JSON.stringify(c) ?? 'null').toString('base64url')}.${sig}`,
  );

/** Notification-shaped objects: every field of the spec, each valid, wrong-typed or absent, plus stray fields. */
const notificationArb = fc
  .tuple(
    fc.record(
      {
        auth_req_id: fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.uuid(), junkArb),
        access_token: fc.oneof({ weight: 4, arbitrary: secretArb('AT') }, { weight: 1, arbitrary: junkArb }),
        token_type: fc.oneof(fc.constant('Bearer'), fc.string({ maxLength: 10 }), junkArb),
        id_token: fc.oneof(
          { weight: 4, arbitrary: jwtLikeArb },
          { weight: 1, arbitrary: secretArb('IDT') },
          { weight: 1, arbitrary: junkArb },
        ),
        expires_in: fc.oneof(fc.integer({ min: -10, max: 100_000 }), junkArb),
        error: fc.oneof(
          fc.constantFrom('access_denied', 'expired_token', 'transaction_failed', 'authorization_pending'),
          fc.string({ maxLength: 20 }),
          junkArb,
        ),
        error_description: fc.oneof(fc.string({ maxLength: 80 }), junkArb),
        jwks_uri: fc.oneof(fc.webUrl(), fc.string({ maxLength: 30 })),
        correlation_id: fc.oneof(fc.string({ maxLength: 40 }), junkArb),
      },
      { requiredKeys: [] },
    ),
    fc.dictionary(fc.string({ maxLength: 12 }), junkArb, { maxKeys: 3 }),
  )
  .map(([fields, extra]) => ({ ...extra, ...fields }));

/** A well-formed failure notification (spec: error response), sometimes with one field replaced by junk. */
const failureArb = fc
  .tuple(
    fc.record({
      auth_req_id: fc.uuid(),
      error: fc.constantFrom('access_denied', 'expired_token', 'transaction_failed'),
      error_description: fc.string({ maxLength: 60 }),
    }),
    // Secret-shaped values only where secrets go (a secret-shaped auth_req_id is an id, and is logged as one).
    fc.option(
      fc.oneof(
        fc.tuple(fc.constantFrom('auth_req_id', 'error', 'error_description'), junkArb),
        fc.tuple(fc.constant('access_token'), fc.oneof(junkArb, secretArb('AT'))),
        fc.tuple(fc.constant('id_token'), fc.oneof(junkArb, jwtLikeArb)),
      ),
    ),
  )
  .map(([base, change]) => (change ? { ...base, [change[0]]: change[1] } : base) as Record<string, unknown>);

const formOf = (body: Record<string, unknown>) =>
  new URLSearchParams(
    Object.entries(body).map(([k, v]) => [k, typeof v === 'string' ? v : (JSON.stringify(v) ?? '')]),
  ).toString();

/** The secrets a case carries: the configured token and key, and every token-like value in the body. */
const secretsOf = (text: string) => [notificationToken, KEY, ...(text.match(SECRET_RE) ?? [])];

describe('fuzzing the mobile-ID notification endpoint over HTTP', () => {
  it(`never answers 5xx, changes nothing when it refuses, and leaks no secret (${WEBHOOK_RUNS.mobileId} cases)`, async () => {
    let ran = 0;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(notificationArb, failureArb),
        fc.constantFrom('json', 'json', 'form', 'raw', 'json-text'),
        fc.oneof(
          { weight: 3, arbitrary: fc.constantFrom('application/json', 'application/x-www-form-urlencoded') },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              'application/json',
              'application/json; charset=utf-8',
              'application/x-www-form-urlencoded',
              'APPLICATION/JSON',
              'text/plain',
              'multipart/form-data',
              '',
            ),
          },
          { weight: 1, arbitrary: headerValueArb },
        ),
        fc.oneof(
          { weight: 4, arbitrary: fc.constant('valid') },
          { weight: 1, arbitrary: fc.constantFrom('none', 'other', 'lower', 'basic') },
        ),
        fc.record(
          { 'x-mobileid-request-id': headerValueArb, 'x-mobileid-transaction-id': headerValueArb },
          { requiredKeys: [] },
        ),
        fc.string({ maxLength: 200 }),
        async (notification, encoding, contentType, auth, support, raw) => {
          ran += 1;
          const body =
            encoding === 'json'
              ? JSON.stringify(notification)
              : encoding === 'form'
                ? formOf(notification)
                : encoding === 'json-text'
                  ? JSON.stringify(raw)
                  : raw;
          const authorization =
            auth === 'valid'
              ? `Bearer ${notificationToken}`
              : auth === 'lower'
                ? `bearer ${notificationToken}`
                : auth === 'basic'
                  ? `Basic ${Buffer.from(`x:${notificationToken}`).toString('base64')}`
                  : auth === 'other'
                    ? 'Bearer SEC-000000000000000000000000'
                    : undefined;
          const headers: Record<string, string> = {
            ...support,
            ...(contentType ? { 'content-type': contentType } : {}),
            ...(authorization ? { authorization } : {}),
          };
          const res = await checkRequest(gw, () => send(gw, 'POST', '/webhooks/mobile-id', headers, body), {
            secrets: secretsOf(body),
            refused: (r) => r.status >= 400,
          });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        },
      ),
      { numRuns: WEBHOOK_RUNS.mobileId },
    );
    expect(ran).toBe(WEBHOOK_RUNS.mobileId);
    expect(unhandled()).toEqual([]);
    // The cases reach every outcome of the intake, not only the first refusal.
    console.info('mobile-ID webhook fuzzing, answers by status:', Object.fromEntries(statuses));
    for (const status of [204, 400, 401, 415]) expect(statuses.get(status) ?? 0, `status ${status}`).toBeGreaterThan(0);
  }, 300_000);
});

describe('fuzzing the verification callback endpoint over HTTP', () => {
  it(`never answers 5xx, changes nothing when it refuses, and leaks no secret (${WEBHOOK_RUNS.verification} cases)`, async () => {
    let ran = 0;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 3, arbitrary: fc.constant('valid') },
          {
            weight: 1,
            arbitrary: fc.string({ unit: fc.constantFrom(...'abcXYZ019_-'), minLength: 1, maxLength: 130 }),
          },
          { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((s) => encodeURIComponent(s)) },
        ),
        fc.tuple(
          fc.record(
            {
              verificationExternalId: fc.oneof(fc.constant('own'), fc.string({ maxLength: 20 }), junkArb),
              status: fc.oneof(
                fc.constantFrom('COMPLETED', 'FAILED', 'ACCEPTED'),
                fc.string({ maxLength: 10 }),
                junkArb,
              ),
              jobResults: junkArb,
              secret: secretArb('SEC'),
            },
            { requiredKeys: [] },
          ),
          fc.dictionary(fc.string({ maxLength: 12 }), junkArb, { maxKeys: 3 }),
        ),
        fc.constantFrom('object', 'raw', 'json-value'),
        fc.oneof(
          fc.constantFrom(
            'application/json',
            'application/problem+json',
            'text/plain',
            'application/x-www-form-urlencoded',
            '',
          ),
          headerValueArb,
        ),
        fc.oneof(
          fc.string({ maxLength: 100 }),
          junkArb.map((v) => JSON.stringify(v)),
        ),
        async (token, [fields, extra], shape, contentType, raw) => {
          ran += 1;
          const object = {
            ...extra,
            ...fields,
            ...(fields.verificationExternalId === 'own' ? { verificationExternalId: externalId } : {}),
          };
          const body = shape === 'object' ? JSON.stringify(object) : shape === 'raw' ? raw : JSON.stringify(raw);
          const path = token === 'valid' ? callbackPath : `/webhooks/verification/${token}`;
          const headers: Record<string, string> = contentType ? { 'content-type': contentType } : {};
          const callbackToken = callbackPath.split('/').pop()!;
          const res = await checkRequest(gw, () => send(gw, 'POST', path, headers, body), {
            secrets: [callbackToken, KEY, ...(body.match(SECRET_RE) ?? [])],
            refused: (r) => r.status >= 400,
          });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        },
      ),
      { numRuns: WEBHOOK_RUNS.verification },
    );
    expect(ran).toBe(WEBHOOK_RUNS.verification);
    expect(unhandled()).toEqual([]);
    console.info('verification callback fuzzing, answers by status:', Object.fromEntries(statuses));
    for (const status of [204, 400, 404]) expect(statuses.get(status) ?? 0, `status ${status}`).toBeGreaterThan(0);
  }, 300_000);

  it('wrote no secret-shaped value to any log line during the whole run', () => {
    expect(gw.logs().match(SECRET_RE)).toBeNull();
    expect(gw.logs()).not.toContain(notificationToken);
    expect(gw.logs()).not.toContain(callbackPath.split('/').pop()!);
  });
});
