// Several retries with one key in flight at once, over every transport that runs a mutation (docs/contract.md,
// Idempotency: "same key while the first call runs: a bounded wait"): the first call is held at the upstream, the
// retries arrive over POST, graphql-ws and SSE in both modes while it is held, and every one of them gets the first
// call's answer (replayed) once the upstream answers. The upstream got one request under the key, and made one
// resource, for a cloud creation and for each identity creation.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { Idempotency, upstreamKey } from '../../src/upstream/idempotency.js';
import { createChain, M, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type Answer, type Transport } from '../helpers/operation.js';

type Upstream = 'cloud' | 'verification' | 'identification';

interface Creation {
  field: string;
  upstream: Upstream;
  query: string;
  input: (c: Chain, n: string) => Record<string, unknown>;
  /** What the upstream holds: counted before and after. */
  made: (gw: TestGateway) => number;
}

const CREATIONS: Creation[] = [
  {
    field: 'createProject',
    upstream: 'cloud',
    query: M.project,
    input: (_c, n) => ({ name: n }),
    made: (gw) => gw.gateway.sandbox.cloud!.projects().length,
  },
  {
    field: 'createKafkaUser',
    upstream: 'cloud',
    query: M.user,
    input: (c, n) => ({ projectId: c.projectId, clusterId: c.clusterId, name: n, password: 'Kafka-pa55!' }),
    made: (gw) => gw.gateway.sandbox.cloud!.resources().length,
  },
  {
    field: 'registerVerification',
    upstream: 'verification',
    query: `mutation($input: RegisterVerificationInput!, $key: UUID) {
      registerVerification(input: $input, idempotencyKey: $key) { verification { id externalId } idempotencyKey replayed } }`,
    input: (_c, n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' }, externalId: n }),
    made: (gw) => gw.gateway.sandbox.verification!.verifications().length,
  },
  {
    field: 'createIdentification',
    upstream: 'identification',
    query: `mutation($input: CreateIdentificationInput!, $key: UUID) {
      createIdentification(input: $input, idempotencyKey: $key) { identification { id url } idempotencyKey replayed } }`,
    input: (_c, n) => ({ workflowId: 'wf-id', applicantExternalId: n, linkLifetimeInMinutes: 10 }),
    made: (gw) => gw.gateway.sandbox.identification!.identifications().length,
  },
];

/** The retries, all sent while the first call (over POST) is held at the upstream. */
const RETRIES: Transport[] = ['post', 'ws', 'sse', 'sse-single', 'post', 'ws'];

function payload(answer: Answer, field: string): Record<string, any> {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>)[field];
}

describe('several retries with one key in flight at once, over every transport', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway({
      // Longer than any test: a waiting retry is woken by the first call's end, never by the end of its wait.
      IDEMPOTENCY_WAIT: '1h',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
    });
    chain = await createChain(gw);
  }, 60_000);
  afterAll(() => gw?.close());
  afterEach(() => vi.restoreAllMocks());

  /** Counts the calls with caller key `key` that reached the idempotency rules (each then claims or waits). */
  const entered = (key: string) => {
    const run = Idempotency.prototype.run;
    let count = 0;
    vi.spyOn(Idempotency.prototype, 'run').mockImplementation(function (this: Idempotency, params) {
      if (params.key === key) count++;
      return run.call(this, params) as never;
    });
    return () => count;
  };

  it.each(CREATIONS.map((c) => ({ c, field: c.field })))(
    '$field: the first call held at the upstream, every retry waits and replays it; one request upstream',
    async ({ c }) => {
      const sandbox = gw.gateway.sandbox[c.upstream]!;
      const key = randomUUID();
      const n = `n-${key.slice(0, 8)}`;
      const variables = { input: c.input(chain, n), key };
      const before = c.made(gw);
      const calls = entered(key);
      const held = sandbox.faults.hold();
      const first = operationOver('post', gw, null, { query: c.query, variables });
      await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBeGreaterThanOrEqual(1);
      const retries = RETRIES.map((t) => operationOver(t, gw, null, { query: c.query, variables }));
      // Every retry is in flight before the upstream answers the first call: each finds the key pending.
      await expect.poll(calls, { timeout: 20_000 }).toBe(1 + RETRIES.length);
      held.release();
      const made = payload(await first, c.field);
      expect(made).toMatchObject({ idempotencyKey: key, replayed: false });
      for (const [i, retry] of (await Promise.all(retries)).entries())
        expect(payload(retry, c.field), RETRIES[i]).toEqual({ ...made, replayed: true });
      const sent = sandbox.requests.filter(
        (r) => r.method === 'POST' && r.headers['idempotency-key'] === upstreamKey('open', key),
      );
      expect(sent).toHaveLength(1);
      expect(c.made(gw) - before).toBe(1);
    },
  );
});
