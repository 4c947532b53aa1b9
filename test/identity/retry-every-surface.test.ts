// The identity creations' idempotency on every transport that runs a mutation (POST /graphql on the direct path and
// on Apollo's, graphql-ws, SSE in both modes): registerVerification and createIdentification retried with the same key
// and an equal input written differently (fields in another order, defaults given, text the gateway trims, literals
// instead of variables) replay the first answer; another input is IDEMPOTENCY_KEY_REUSED; the upstream got one
// request under the key; and a retry over another transport than the first call replays too.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { graphqlLiteral, MUTATION_SURFACES, operationOver, type Answer, type Transport } from '../helpers/operation.js';

type Input = Record<string, unknown>;

interface Creation {
  field: string;
  type: string;
  selection: string;
  input: (n: string) => Input;
  same: (n: string) => Input;
  other: (n: string) => Input;
}

const CREATIONS: Creation[] = [
  {
    field: 'registerVerification',
    type: 'RegisterVerificationInput',
    selection: '{ verification { id externalId } idempotencyKey replayed }',
    input: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Petrova', firstName: 'Anna' }, externalId: n }),
    same: (n) => ({
      externalId: ` ${n} `,
      callback: true,
      applicant: { firstName: 'Anna', lastName: 'Petrova' },
      workflowId: 'wf-kyc ',
    }),
    other: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova', firstName: 'Anna' }, externalId: n }),
  },
  {
    field: 'createIdentification',
    type: 'CreateIdentificationInput',
    selection: '{ identification { id url } idempotencyKey replayed }',
    input: (n) => ({ workflowId: 'wf-id', applicantExternalId: n, linkLifetimeInMinutes: 10 }),
    same: (n) => ({
      environment: 'PRODUCTION',
      linkLifetimeInMinutes: 10,
      applicantExternalId: `${n} `,
      workflowId: ' wf-id',
    }),
    other: (n) => ({ workflowId: 'wf-id', applicantExternalId: n, linkLifetimeInMinutes: 11 }),
  },
];

const over = (transport: Transport, gw: TestGateway, c: Creation, input: Input, key: string, inline = false) =>
  operationOver(
    transport,
    gw,
    null,
    inline
      ? { query: `mutation { ${c.field}(input: ${graphqlLiteral(input)}, idempotencyKey: "${key}") ${c.selection} }` }
      : {
          query: `mutation($input: ${c.type}!, $key: UUID) { ${c.field}(input: $input, idempotencyKey: $key) ${c.selection} }`,
          variables: { input, key },
        },
  );

function payload(answer: Answer, c: Creation): Record<string, any> {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>)[c.field];
}

/** The requests the identity upstreams got under the Idempotency-Key of caller key `key` (the open gateway's). */
const sentUnder = (gw: TestGateway, key: string) =>
  [...gw.gateway.sandbox.verification!.requests, ...gw.gateway.sandbox.identification!.requests].filter(
    (r) => r.method === 'POST' && r.headers['idempotency-key'] === upstreamKey('open', key),
  ).length;

describe.each(MUTATION_SURFACES)(
  'the identity creations are safe to retry, POST /graphql on $path',
  ({ options, transports }) => {
    let gw: TestGateway;
    beforeAll(async () => {
      gw = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' }, options);
    });
    afterAll(() => gw?.close());

    it.each(transports.flatMap((transport) => CREATIONS.map((c) => ({ transport, c, field: c.field }))))(
      '$field over $transport: an equal input replays, another is IDEMPOTENCY_KEY_REUSED, one upstream request',
      async ({ transport, c }) => {
        const key = randomUUID();
        const n = `customer-${key}`;
        const first = payload(await over(transport, gw, c, c.input(n), key), c);
        expect(first).toMatchObject({ idempotencyKey: key, replayed: false });
        for (const [input, k, inline] of [
          [c.input(n), key, false],
          [c.same(n), key.toUpperCase(), false],
          [c.same(n), key.toUpperCase(), true],
        ] as const) {
          const again = payload(await over(transport, gw, c, input, k, inline), c);
          expect(again, JSON.stringify(input)).toEqual({ ...first, replayed: true });
        }
        for (const inline of [false, true]) {
          const reused = await over(transport, gw, c, c.other(n), key, inline);
          expect(reused.errors?.[0]?.extensions?.code, reused.raw).toBe('IDEMPOTENCY_KEY_REUSED');
        }
        expect(sentUnder(gw, key)).toBe(1);
      },
    );

    it.each(
      transports.flatMap((first) =>
        (['post', 'ws', 'sse'] as Transport[]).flatMap((retry) => CREATIONS.map((c) => ({ first, retry, c }))),
      ),
    )('$c.field first over $first replays over $retry', async ({ first, retry, c }) => {
      const key = randomUUID();
      const n = `customer-${key}`;
      const made = payload(await over(first, gw, c, c.input(n), key), c);
      const again = payload(await over(retry, gw, c, c.same(n), key, true), c);
      expect(again).toEqual({ ...made, replayed: true });
      expect(sentUnder(gw, key)).toBe(1);
    });
  },
);
