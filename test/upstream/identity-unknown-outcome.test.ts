import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import type { FaultSpec } from '../../src/sandbox/faults.js';
import { upstreamKey } from '../../src/upstream/idempotency.js';
import { gatewaysPerTest, startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * The identity endpoints (identification, verification registration, rfm) do not document Idempotency-Key
 * (docs/decisions/011): a request whose outcome is unknown is never sent again on its own; only
 * one that provably never arrived, or that the upstream said it did not process, is retried. Faults are
 * injected by the sandbox over real HTTP and the upstream requests are counted there.
 */
interface Endpoint {
  name: string;
  upstream: string;
  path: string;
  sandbox: (t: TestGateway) => {
    requests: readonly { path: string; headers: Record<string, string> }[];
    faults: { enqueueFor(p: string, ...f: FaultSpec[]): unknown; clear(): void };
    clearRequests(): void;
  };
  mutation: string;
  variables: (tag: string) => Record<string, unknown>;
}

const ENDPOINTS: Endpoint[] = [
  {
    name: 'createIdentification',
    upstream: 'identification',
    path: '/api/v2/identifications/workflow-instances',
    sandbox: (t) => t.gateway.sandbox.identification!,
    mutation: `mutation($input: CreateIdentificationInput!, $key: UUID) { createIdentification(input: $input, idempotencyKey: $key) { identification { id } replayed } }`,
    variables: (tag) => ({ input: { workflowId: `wf-${tag}` } }),
  },
  {
    name: 'registerVerification',
    upstream: 'verification',
    path: '/api/v2/verifications/workflow-instances',
    sandbox: (t) => t.gateway.sandbox.verification!,
    mutation: `mutation($input: RegisterVerificationInput!, $key: UUID) { registerVerification(input: $input, idempotencyKey: $key) { verification { externalId } replayed } }`,
    variables: (tag) => ({ input: { workflowId: 'wf-kyc', applicant: { lastName: tag } } }),
  },
  {
    name: 'checkRfm',
    upstream: 'rfm',
    path: '/api/v1/rfm/is-in-catalog',
    sandbox: (t) => t.gateway.sandbox.verification!,
    mutation: `mutation($input: JSON!, $key: UUID) { checkRfm(input: $input, idempotencyKey: $key) { inCatalog replayed } }`,
    variables: (tag) => ({ input: { fullName: tag } }),
  },
];

/** Outcome unknown: the request may have been applied. */
const UNKNOWN: Array<[string, FaultSpec]> = [
  ['a 500', { status: 500, retryAfterSeconds: null }],
  ['a 502', { status: 502, retryAfterSeconds: null }],
  ['a 500 with Retry-After', { status: 500, retryAfterSeconds: 0 }],
  ['a 503 without Retry-After', { status: 503, retryAfterSeconds: null }],
  ['a reset before the answer', 'reset'],
  ['a reset after the upstream processed it', 'reset-after'],
  ['a timeout', 'timeout'],
  // A redirect answering the creation ("created, see there") is no refusal: neither followed nor repeated.
  ['a 303 See Other after the upstream processed it', 'see-other'],
];

/** The upstream said it did not process the request. */
const NOT_PROCESSED: Array<[string, FaultSpec]> = [
  ['a 429 with Retry-After', { status: 429, retryAfterSeconds: 0 }],
  ['a 429 without Retry-After', { status: 429, retryAfterSeconds: null }],
  ['a 503 with Retry-After', { status: 503, retryAfterSeconds: 0 }],
];

describe('identity endpoints: an unknown outcome is never repeated automatically', () => {
  /**
   * An attempt timeout far longer than any answer takes: a call meant to be answered is never timed out by a stall of
   * the machine during its round trip.
   */
  let t: TestGateway;
  /** A short attempt timeout, only for the 'timeout' fault, whose calls are meant to fail. */
  let short: TestGateway;
  beforeAll(async () => {
    // Each gateway meets every fault in turn: its circuit breakers, which would open over that sequence and refuse the
    // tests after, are off here (test/upstream/circuit-breaker.test.ts covers them).
    const env = { UPSTREAM_MAX_RETRIES: '2', SANDBOX_CALLBACK_DELAY_MS: '600000', UPSTREAM_CIRCUIT_BREAKER: 'off' };
    [t, short] = await Promise.all([
      startTestGateway({ ...env, UPSTREAM_TIMEOUT: '60s' }),
      startTestGateway({ ...env, UPSTREAM_TIMEOUT: '300ms' }),
    ]);
  });
  afterAll(() => Promise.all([t?.close(), short?.close()]));
  afterEach(() => {
    for (const e of ENDPOINTS) {
      for (const gw of [t, short]) {
        e.sandbox(gw).faults.clear();
        e.sandbox(gw).clearRequests();
      }
    }
  });

  for (const e of ENDPOINTS) {
    const calls = (gw = t) => e.sandbox(gw).requests.filter((r) => r.path === e.path);

    describe(e.name, () => {
      it.each(UNKNOWN)(
        '%s: one upstream request, then UPSTREAM_OUTCOME_UNKNOWN with the key to retry with',
        async (_label, fault) => {
          const gw = fault === 'timeout' ? short : t;
          e.sandbox(gw).faults.enqueueFor(e.path, fault);
          const key = randomUUID();
          const res = await gw.graphql(e.mutation, { ...e.variables(`unknown-${key}`), key });
          expect(res.errors?.[0]?.extensions).toMatchObject({
            code: 'UPSTREAM_OUTCOME_UNKNOWN',
            upstream: e.upstream,
            attempts: 1,
            idempotencyKey: key,
            upstreamIdempotencyKey: upstreamKey('open', key),
          });
          expect(res.errors?.[0]?.message).toContain('not sent again');
          expect(calls(gw)).toHaveLength(1);
        },
      );

      it.each(NOT_PROCESSED)('%s: retried under the same key and answered', async (_label, fault) => {
        e.sandbox(t).faults.enqueueFor(e.path, fault);
        const key = randomUUID();
        const res = await t.graphql(e.mutation, { ...e.variables(`retried-${key}`), key });
        expect(res.errors).toBeUndefined();
        expect(calls().map((c) => c.headers['idempotency-key'])).toEqual([
          upstreamKey('open', key),
          upstreamKey('open', key),
        ]);
      });

      it('remembers the unknown outcome: the key stays bound to its request, and a retry with it is sent once more under the same upstream key', async () => {
        e.sandbox(t).faults.enqueueFor(e.path, 'reset-after');
        const key = randomUUID();
        const vars = e.variables(`remembered-${key}`);
        const first = await t.graphql(e.mutation, { ...vars, key });
        expect(first.errors?.[0]?.extensions?.code).toBe('UPSTREAM_OUTCOME_UNKNOWN');
        const row = await t.gateway.services.store.db
          .selectFrom('idempotency_records')
          .select(['state', 'response'])
          .where('key', '=', key)
          .executeTakeFirstOrThrow();
        expect(row.state).toBe('unknown');
        expect(JSON.parse(row.response!)).toMatchObject({ upstream: e.upstream });

        const other = await t.graphql(e.mutation, { ...e.variables(`other-${key}`), key });
        expect(other.errors?.[0]?.extensions?.code).toBe('IDEMPOTENCY_KEY_REUSED');
        expect(calls()).toHaveLength(1);

        const retry = await t.graphql(e.mutation, { ...vars, key });
        expect(retry.errors).toBeUndefined();
        expect(Object.values(retry.data!)[0]).toMatchObject({ replayed: false });
        expect(calls().map((c) => c.headers['idempotency-key'])).toEqual([
          upstreamKey('open', key),
          upstreamKey('open', key),
        ]);
        const replay = await t.graphql(e.mutation, { ...vars, key });
        expect(Object.values(replay.data!)[0]).toMatchObject({ replayed: true });
        expect(calls()).toHaveLength(2);
      });
    });
  }

  it('a call that was waiting on the same key when the outcome became unknown gets UPSTREAM_OUTCOME_UNKNOWN too, not a second request', async () => {
    const e = ENDPOINTS[0]!;
    e.sandbox(short).faults.enqueueFor(e.path, 'timeout');
    const key = randomUUID();
    const vars = { ...e.variables(`concurrent-${key}`), key };
    const [a, b] = await Promise.all([short.graphql(e.mutation, vars), short.graphql(e.mutation, vars)]);
    expect([a.errors?.[0]?.extensions?.code, b.errors?.[0]?.extensions?.code]).toEqual([
      'UPSTREAM_OUTCOME_UNKNOWN',
      'UPSTREAM_OUTCOME_UNKNOWN',
    ]);
    expect(b.errors?.[0]?.extensions).toMatchObject({ idempotencyKey: key, upstream: 'identification' });
    expect(e.sandbox(short).requests.filter((r) => r.path === e.path)).toHaveLength(1);
  });

  it('the verification results lookup, which changes nothing upstream, is still retried after a 500', async () => {
    const sandbox = t.gateway.sandbox.verification!;
    const reg = await t.graphql(ENDPOINTS[1]!.mutation, ENDPOINTS[1]!.variables('lookup'));
    const id = reg.data!.registerVerification.verification.externalId;
    sandbox.faults.enqueueFor('/api/v2/verifications/results', { status: 500, retryAfterSeconds: null });
    const res = await t.graphql(`query($id: ID!) { verificationResults(externalIds: [$id]) { status } }`, { id });
    expect(res.errors).toBeUndefined();
    expect(sandbox.requests.filter((r) => r.path === '/api/v2/verifications/results')).toHaveLength(2);
  });

  it('counts each unknown outcome in gateway_upstream_outcome_unknown_total', async () => {
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(
      /gateway_upstream_outcome_unknown_total\{upstream="identification",route="POST \/api\/v2\/identifications\/workflow-instances"\} [1-9]/,
    );
  });
});

describe('identity endpoints: what is retried automatically', () => {
  const gateway = gatewaysPerTest();

  it('a request that never reached the upstream (connection refused) is retried, then UPSTREAM_UNAVAILABLE', async () => {
    const port = await closedPort();
    const gw = await gateway({
      GATEWAY_API_KEYS: 'k',
      IDENTIFICATION_API_URL: `http://127.0.0.1:${port}`,
      IDENTIFICATION_API_TOKEN: 'token',
      SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
      UPSTREAM_MAX_RETRIES: '2',
    });
    const res = await gw.graphql(ENDPOINTS[0]!.mutation, ENDPOINTS[0]!.variables('refused'), { key: 'k' });
    expect(res.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: 'identification',
      attempts: 3,
    });
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(
      /gateway_upstream_retries_total\{upstream="identification",route="[^"]+",reason="ECONNREFUSED"\} 2/,
    );
  });

  it('IDEMPOTENT_UPSTREAMS turns automatic retries of unknown outcomes back on for the upstreams it names', async () => {
    const gw = await gateway({
      IDEMPOTENT_UPSTREAMS: 'identification,rfm',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
    });
    const fault = { status: 500, retryAfterSeconds: null };
    for (const e of ENDPOINTS) e.sandbox(gw).faults.enqueueFor(e.path, fault);
    const results = [];
    for (const e of ENDPOINTS)
      results.push(await gw.graphql(e.mutation, { ...e.variables('opt-in'), key: randomUUID() }));
    const count = (e: Endpoint) => e.sandbox(gw).requests.filter((r) => r.path === e.path).length;
    // identification and rfm: retried and answered; verification (not named): not repeated.
    expect(results[0]!.errors).toBeUndefined();
    expect(results[2]!.errors).toBeUndefined();
    expect(results[1]!.errors?.[0]?.extensions?.code).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    expect(ENDPOINTS.map(count)).toEqual([2, 1, 2]);
  });

  it('refuses an IDEMPOTENT_UPSTREAMS entry that is not an identity upstream, naming the variable', async () => {
    await expect(startTestGateway({ IDEMPOTENT_UPSTREAMS: 'identification,mobile-id' })).rejects.toThrow(
      /IDEMPOTENT_UPSTREAMS: must list upstreams among identification, verification, rfm/,
    );
  });
});

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
