// A retry over another transport than the first call (an app whose socket dropped retries over POST, or the converse)
// keeps each idempotency promise: while the first call is still at the upstream the retry waits and is
// IDEMPOTENCY_KEY_IN_USE, then replays once it ended; after UPSTREAM_UNAVAILABLE (cloud) or UPSTREAM_OUTCOME_UNKNOWN
// (identity) the retry with the same key sends the same upstream key and creates once, and the next one replays.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type Answer, type Transport } from '../helpers/operation.js';

interface Creation {
  field: string;
  upstream: 'cloud' | 'verification';
  query: string;
  input: (n: string) => Record<string, unknown>;
  /** What the upstream made: counted before and after. */
  made: (gw: TestGateway) => number;
  /** The fault that fails the first call, and the code it is answered with. */
  fault: 'timeout' | '503';
  code: string;
}

const CREATIONS: Creation[] = [
  {
    field: 'createProject',
    upstream: 'cloud',
    query: `mutation($input: CreateProjectInput!, $key: UUID) {
      createProject(input: $input, idempotencyKey: $key) { project { id } idempotencyKey replayed } }`,
    input: (n) => ({ name: n }),
    made: (gw) => gw.gateway.sandbox.cloud!.projects().length,
    fault: '503',
    code: 'UPSTREAM_UNAVAILABLE',
  },
  {
    field: 'registerVerification',
    upstream: 'verification',
    query: `mutation($input: RegisterVerificationInput!, $key: UUID) {
      registerVerification(input: $input, idempotencyKey: $key) { verification { id } idempotencyKey replayed } }`,
    input: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' }, externalId: n }),
    made: (gw) => gw.gateway.sandbox.verification!.verifications().length,
    fault: 'timeout',
    code: 'UPSTREAM_OUTCOME_UNKNOWN',
  },
];

const PAIRS: Array<{ first: Transport; retry: Transport }> = [
  { first: 'ws', retry: 'post' },
  { first: 'post', retry: 'sse' },
  { first: 'sse-single', retry: 'ws' },
];

const CASES = CREATIONS.flatMap((c) => PAIRS.map((p) => ({ ...p, c, field: c.field })));

function payload(answer: Answer, field: string): Record<string, any> {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>)[field];
}

describe('a retry over another transport than the first call', () => {
  const ENV = {
    IDEMPOTENCY_WAIT: '100ms',
    UPSTREAM_MAX_RETRIES: '0',
    // Each case fails one call on purpose: no circuit opens over the file.
    UPSTREAM_CIRCUIT_BREAKER: 'off',
    SANDBOX_CALLBACK_DELAY_MS: '600000',
  };
  /**
   * For the 'timeout' fault alone, which fails a first call: the retries after it, on the same gateway, are answered
   * within the timeout even if the machine stalls for a few seconds meanwhile.
   */
  let gw: TestGateway;
  /**
   * An attempt timeout far longer than a held call stays upstream: the held call ends when the test releases it, never
   * on a timer that a stall of the machine between its arrival and its release could let run out first. Every case
   * whose failure is not a timeout runs here.
   */
  let holding: TestGateway;
  beforeAll(async () => {
    [gw, holding] = await Promise.all([
      startTestGateway({ ...ENV, UPSTREAM_TIMEOUT: '3s' }),
      startTestGateway({ ...ENV, UPSTREAM_TIMEOUT: '60s' }),
    ]);
  });
  afterAll(() => Promise.all([gw?.close(), holding?.close()]));

  const send = (transport: Transport, c: Creation, n: string, key: string, to = gw) =>
    operationOver(transport, to, null, { query: c.query, variables: { input: c.input(n), key } });
  const sentUnder = (c: Creation, key: string, to = gw) =>
    to.gateway.sandbox[c.upstream]!.requests.filter(
      (r) => r.method === 'POST' && r.headers['idempotency-key'] === upstreamKey('open', key),
    );

  it.each(CASES)(
    '$field first over $first, retried over $retry while it runs: IDEMPOTENCY_KEY_IN_USE, then replayed',
    async ({ first, retry, c }) => {
      const key = randomUUID();
      const n = `in-use-${key}`;
      const held = holding.gateway.sandbox[c.upstream]!.faults.hold();
      const running = send(first, c, n, key, holding);
      await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBe(1);
      const inUse = await send(retry, c, n, key, holding);
      expect(inUse.errors?.[0]?.extensions?.code, inUse.raw).toBe('IDEMPOTENCY_KEY_IN_USE');
      held.release();
      const made = payload(await running, c.field);
      expect(made.replayed).toBe(false);
      expect(payload(await send(retry, c, n, key, holding), c.field)).toEqual({ ...made, replayed: true });
      expect(sentUnder(c, key, holding)).toHaveLength(1);
    },
  );

  it.each(CASES)(
    '$field failed over $first, retried over $retry: created once under the same upstream key, then replayed',
    async ({ first, retry, c }) => {
      const key = randomUUID();
      const n = `failed-${key}`;
      const to = c.fault === 'timeout' ? gw : holding;
      const before = c.made(to);
      to.gateway.sandbox[c.upstream]!.faults.enqueue(c.fault);
      const failed = await send(first, c, n, key, to);
      expect(failed.errors?.[0]?.extensions?.code, failed.raw).toBe(c.code);
      const created = payload(await send(retry, c, n, key, to), c.field);
      expect(created).toMatchObject({ idempotencyKey: key, replayed: false });
      expect(payload(await send(first, c, n, key, to), c.field)).toEqual({ ...created, replayed: true });
      expect(c.made(to) - before).toBe(1);
      expect(new Set(sentUnder(c, key, to).map((r) => r.headers['idempotency-key'])).size).toBe(1);
    },
  );
});
