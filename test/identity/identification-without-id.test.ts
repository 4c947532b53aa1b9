import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { FaultSpec } from '../../src/sandbox/faults.js';
import { IDENTIFICATIONS_PATH, type IdentificationSandbox } from '../../src/sandbox/identification.js';
import type { TestGateway } from '../helpers/gateway.js';
import { twoIdentificationEnvironments, type TwoEnvironments } from '../helpers/identity.js';
import { clearTextOf, storeSnapshot } from '../helpers/store.js';

/**
 * An identification request answered 2xx is a created request, even when the gateway cannot read its id
 * (docs/contract.md, UPSTREAM_ANSWER_INCOMPLETE; docs/decisions/042): the answer is kept with the key, and a retry
 * with the same key reads the kept answer again instead of creating a second request upstream.
 */

const CREATE = `mutation($input: CreateIdentificationInput!, $key: UUID) {
  createIdentification(input: $input, idempotencyKey: $key) { identification { id } idempotencyKey replayed }
}`;

const APP = 'without-id-app';
const TOKENS = { PRODUCTION: 'production-token-7c1d', PRODLIKE: 'prodlike-token-9e2f' } as const;

/** The 202 answer with its id replaced by `id` (absent when undefined): the request is created all the same. */
const withId =
  (id: unknown) =>
  (body: unknown): unknown => {
    const { id: _created, ...rest } = body as Record<string, unknown>;
    return id === undefined ? rest : { ...rest, id };
  };

const UNREADABLE: Array<[string, FaultSpec]> = [
  ['without an id', { alter: withId(undefined) }],
  ['with an id that is an object', { alter: withId({ uuid: 'not-read' }) }],
  ['with an id that is an empty string', { alter: withId('') }],
  ['with an id that is null', { alter: withId(null) }],
  ['with a body that is not JSON', 'ok-not-json'],
  ['with JSON that holds no id at all', 'ok-no-id'],
];

let two: TwoEnvironments;
let t: TestGateway;
let upstreams: TwoEnvironments['upstreams'];

beforeAll(async () => {
  two = await twoIdentificationEnvironments(TOKENS, APP);
  ({ gateway: t, upstreams } = two);
});
afterAll(() => two?.close());

const sent = (u: IdentificationSandbox) => two.sent(u);

describe('an identification request answered 2xx without a readable id', () => {
  for (const environment of ['PRODUCTION', 'PRODLIKE'] as const) {
    it.each(UNREADABLE)(
      `${environment}, %s: UPSTREAM_ANSWER_INCOMPLETE, and a retry with the same key answers the same without sending again`,
      async (_label, fault) => {
        const upstream = upstreams[environment];
        const name = environment === 'PRODUCTION' ? 'identification' : 'identification-prodlike';
        const before = { sent: sent(upstream), created: upstream.identifications().length };
        upstream.faults.enqueueFor(IDENTIFICATIONS_PATH, fault);
        const key = randomUUID();
        const input = { workflowId: `wf-without-id-${randomUUID()}`, environment };

        const first = await t.graphql(CREATE, { input, key }, { key: APP });
        expect(upstream.faults.pending).toBe(0);
        expect(first.data?.createIdentification ?? null).toBeNull();
        const error = first.errors![0]!;
        expect(error.extensions).toMatchObject({
          code: 'UPSTREAM_ANSWER_INCOMPLETE',
          upstream: name,
          status: 202,
          idempotencyKey: key,
          upstreamIdempotencyKey: upstream.requests.at(-1)!.headers['idempotency-key'],
        });
        expect(error.message).toContain('with the same idempotencyKey reads the kept answer again');
        expect(sent(upstream) - before.sent).toBe(1);
        expect(upstream.identifications().length - before.created, 'the request exists upstream').toBe(1);

        const again = await t.graphql(CREATE, { input, key }, { key: APP });
        expect(again.errors![0]!.extensions).toEqual(error.extensions);
        expect(again.errors![0]!.message).toBe(error.message);
        expect(sent(upstream) - before.sent, 'the retry sent nothing').toBe(1);
        expect(upstream.identifications().length - before.created, 'one request upstream').toBe(1);
      },
    );
  }

  it('keeps the answer without the link, its short id, the applicant, the redirect or the token in clear', async () => {
    const upstream = upstreams.PRODUCTION;
    const applicantExternalId = `applicant-${randomUUID()}`;
    const redirectUrl = `https://app.example/back/${randomUUID()}`;
    let link = '';
    let idShort = '';
    upstream.faults.enqueueFor(IDENTIFICATIONS_PATH, {
      alter: (body) => {
        const { id, ...rest } = body as { id: string; url: string; idShort: string };
        link = rest.url;
        idShort = rest.idShort;
        // An answer that names the request elsewhere and echoes what it was sent, the token included.
        return {
          ...rest,
          request: { ref: id, applicantExternalId, redirectUrl, authorization: `Bearer ${TOKENS.PRODUCTION}` },
        };
      },
    });
    const key = randomUUID();
    const input = { workflowId: 'wf-without-id-secrets', applicantExternalId, redirectUrl };
    const first = await t.graphql(CREATE, { input, key }, { key: APP });
    expect(first.errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    expect(link).toMatch(/^https?:\/\//);
    expect(idShort.length).toBeGreaterThan(0);
    const again = await t.graphql(CREATE, { input, key }, { key: APP });
    expect(again.errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');

    const shown = JSON.stringify([first, again]);
    const stored = clearTextOf(await storeSnapshot(t));
    for (const secret of [link, idShort, applicantExternalId, redirectUrl, TOKENS.PRODUCTION]) {
      expect(shown, `${secret} in the answer`).not.toContain(secret);
      expect(stored, `${secret} in the store`).not.toContain(secret);
      expect(t.logs(), `${secret} in the log`).not.toContain(secret);
    }
    // What is kept still shows the answer's shape, for an operator to read.
    expect(first.errors![0]!.extensions!.answer).toMatchObject({
      url: '***',
      idShort: '***',
      request: { applicantExternalId: '***', redirectUrl: '***', ref: expect.any(String) },
    });
  });

  it.each([
    ['nested in an envelope', (body: Record<string, unknown>) => ({ data: body })],
    [
      'as a link under another name',
      ({ id: _id, url, idShort, ...rest }: Record<string, unknown>) => ({
        ...rest,
        result: { Link: url, ID_SHORT: idShort },
      }),
    ],
    [
      'quoted in a text answer',
      (body: Record<string, unknown>) => `created: ${String(body.url)} (short ${String(body.idShort)})`,
    ],
  ])('keeps the link in no clear form when the answer holds it %s', async (_shape, alter) => {
    const upstream = upstreams.PRODUCTION;
    let link = '';
    upstream.faults.enqueueFor(IDENTIFICATIONS_PATH, {
      alter: (body) => {
        link = (body as { url: string }).url;
        return alter(body as Record<string, unknown>);
      },
    });
    const key = randomUUID();
    const first = await t.graphql(CREATE, { input: { workflowId: 'wf-without-id-envelope' }, key }, { key: APP });
    expect(first.errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    expect(link).toMatch(/^https?:\/\//);
    expect(JSON.stringify(first), 'the link in the answer').not.toContain(link);
    expect(clearTextOf(await storeSnapshot(t)), 'the link in the store').not.toContain(link);
    expect(t.logs(), 'the link in the log').not.toContain(link);
    // The short id, the link's last segment here, quoted alone in the text answer.
    const idShort = link.split('/').pop()!;
    expect(JSON.stringify(first), 'the short id in the answer').not.toContain(idShort);
    expect(clearTextOf(await storeSnapshot(t)), 'the short id in the store').not.toContain(idShort);
  });
});
