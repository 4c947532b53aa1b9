// What a creation's upstream call logs while its request runs names that request's id (docs/contract.md,
// INTERNAL_SERVER_ERROR: logged in full with the request id; docs/operations.md, Logs): the id of the call's own `request`
// line, which the client read in `X-Request-Id`. Each case sends its call with an `X-Request-Id` of its own and finds the
// line by its message: written once per event, with that id, and without the app's key or the gateway's credentials.
// Faults come from the sandbox upstreams over loopback; a lease lapses on the test clock, never by a wait.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { PROJECTS_PATH, TOKEN_PATH } from '../../src/sandbox/cloud.js';
import { IdempotencyRecords } from '../../src/store/idempotency.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest, logLines, type TestGateway } from '../helpers/gateway.js';
import { kafkaInput } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const KEY = 'lines-name-their-request-key-0001';
/** The gateway's own cloud credential in the token case: never on a line. */
const CREDENTIAL = `cloud-secret-${randomUUID()}`;

afterEach(() => {
  vi.restoreAllMocks();
});

interface Line {
  msg: string;
  level: number;
  requestId?: string;
  upstream?: string;
  attempt?: number;
  idempotencyKey?: string;
}

const lines = (gw: TestGateway, msg: string) => logLines<Line>(gw, (l) => l.msg.startsWith(msg));

const ATTEMPT_FAILED = 'upstream attempt failed';
const OUTCOME_UNKNOWN = 'upstream outcome unknown; not repeated';
const NOT_RENEWED = 'idempotency lease could not be renewed';
const RENEWAL_FAILED = 'idempotency lease renewal failed';
const LOST = 'the call ran on after its idempotency lease lapsed';

const IDENTIFICATION = `mutation($input: CreateIdentificationInput!, $key: UUID) {
  createIdentification(input: $input, idempotencyKey: $key) { identification { id } replayed }
}`;
const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { externalId } }
}`;
const RESULTS = `query($id: ID!) { verificationResults(externalIds: [$id]) { status } }`;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;

/** `query` sent with `requestId` as its X-Request-Id, under the app's key. */
function send(gw: TestGateway, query: string, variables: Record<string, unknown>, requestId: string) {
  return gw.graphql(query, variables, { key: KEY, headers: { 'x-request-id': requestId } });
}

/** A fresh request id, marked with what the call is. */
const idFor = (what: string) => `${what}-${randomUUID()}`;

/** The call's own `request` line is there, and names `requestId`: the id its other lines must name. */
function requestLogged(gw: TestGateway, requestId: string): void {
  expect(logLines<Line>(gw, (l) => l.msg === 'request' && l.requestId === requestId)).toHaveLength(1);
}

function noSecrets(gw: TestGateway): void {
  expect(gw.logs()).not.toContain(KEY);
  expect(gw.logs()).not.toContain(CREDENTIAL);
}

describe("a creation's upstream lines name its request", () => {
  it("a cloud creation answered after two transient failures: one 'upstream attempt failed' per failure, each naming the call", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY, UPSTREAM_MAX_RETRIES: '3' });
    gw.gateway.sandbox.cloud!.faults.enqueueFor(
      PROJECTS_PATH,
      { status: 503, retryAfterSeconds: 0 },
      { status: 500, retryAfterSeconds: null },
    );
    const requestId = idFor('retried');
    const res = await send(gw, M.project, { input: { name: 'retried' } }, requestId);
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();

    requestLogged(gw, requestId);
    expect(lines(gw, ATTEMPT_FAILED)).toEqual([
      expect.objectContaining({ level: 40, upstream: 'cloud', attempt: 1, requestId }),
      expect.objectContaining({ level: 40, upstream: 'cloud', attempt: 2, requestId }),
    ]);
    noSecrets(gw);
  });

  it("a provisioning step retried upstream: its 'upstream attempt failed' names the call that launched the run", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY, UPSTREAM_MAX_RETRIES: '3' });
    gw.gateway.sandbox.cloud!.faults.enqueueFor(PROJECTS_PATH, { status: 503, retryAfterSeconds: 0 });
    const launched = idFor('launch');
    const res = await send(gw, PROVISION, { input: kafkaInput('step-retried', '10.71.0.0/24') }, launched);
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    await gw.gateway.services.provisioning.idle();

    requestLogged(gw, launched);
    expect(lines(gw, ATTEMPT_FAILED)).toEqual([
      expect.objectContaining({ upstream: 'cloud', attempt: 1, requestId: launched }),
    ]);
    noSecrets(gw);
  });

  it("an identification whose outcome is unknown: 'upstream outcome unknown' names the call, once", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY });
    gw.gateway.sandbox.identification!.faults.enqueueFor('/api/v2/identifications/workflow-instances', 'reset-after');
    const requestId = idFor('unknown');
    const res = await send(gw, IDENTIFICATION, { input: { workflowId: 'wf-unknown' }, key: randomUUID() }, requestId);
    expect(res.errors?.[0]?.extensions?.code).toBe('UPSTREAM_OUTCOME_UNKNOWN');

    requestLogged(gw, requestId);
    expect(lines(gw, OUTCOME_UNKNOWN)).toEqual([
      expect.objectContaining({ level: 40, upstream: 'identification', requestId }),
    ]);
    noSecrets(gw);
  });

  it("a verification results lookup retried after a 500: its 'upstream attempt failed' names the query", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY });
    const registered = await send(
      gw,
      REGISTER,
      { input: { workflowId: 'wf-kyc', applicant: { lastName: 'lookup' } } },
      idFor('register'),
    );
    expect(registered.errors, JSON.stringify(registered.errors)).toBeUndefined();
    const id = registered.data!.registerVerification.verification.externalId as string;
    gw.gateway.sandbox.verification!.faults.enqueueFor('/api/v2/verifications/results', {
      status: 500,
      retryAfterSeconds: null,
    });
    const requestId = idFor('lookup');
    const res = await send(gw, RESULTS, { id }, requestId);
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();

    requestLogged(gw, requestId);
    expect(lines(gw, ATTEMPT_FAILED)).toEqual([
      expect.objectContaining({ upstream: 'verification', attempt: 1, requestId }),
    ]);
    noSecrets(gw);
  });

  it("the cloud token endpoint refusing the gateway's credentials: its error line names the call that fetched", async () => {
    const gw = await start({
      GATEWAY_API_KEYS: KEY,
      CLOUD_API_CREDENTIALS: JSON.stringify({ keyId: 'gateway', secret: CREDENTIAL }),
    });
    gw.gateway.sandbox.cloud!.faults.enqueueFor(TOKEN_PATH, { status: 401 });
    const requestId = idFor('token');
    const res = await send(gw, M.project, { input: { name: 'token-refused' } }, requestId);
    expect(res.errors?.[0]?.extensions?.code).toBe('UPSTREAM_UNAUTHENTICATED');

    requestLogged(gw, requestId);
    expect(lines(gw, 'the cloud token endpoint refused')).toEqual([
      expect.objectContaining({ level: 50, upstream: 'cloud-token', requestId }),
    ]);
    noSecrets(gw);
  });
});

describe("a creation's idempotency lease lines name its request", () => {
  it("a lease that lapsed while the call waited upstream: each 'could not be renewed' and the end not stored name it", async () => {
    let now = Date.now();
    // Renewals every 100 ms of the wall's, at the test clock's time, which only the test moves.
    const leaseMs = 300;
    const gw = await start(
      { GATEWAY_API_KEYS: KEY, IDEMPOTENCY_TAKEOVER: `${leaseMs}ms`, IDEMPOTENCY_WAIT: '100ms' },
      { testing: { clock: () => now } },
    );
    const faults = gw.gateway.sandbox.cloud!.faults;
    const key = randomUUID();
    const heldA = faults.hold();
    const stalled = idFor('stalled');
    const a = send(gw, M.project, { input: { name: 'stalled' }, key }, stalled);
    try {
      await waitFor(() => heldA.arrived() === 1, 20_000, 'the call upstream');
      now += leaseMs + 1;
      await waitFor(() => lines(gw, NOT_RENEWED).length > 0, 20_000, 'a renewal refused');
      // Another call with the key takes the lapsed record over; the first call's end is then not stored.
      const heldB = faults.hold();
      const takeover = idFor('takeover');
      const b = send(gw, M.project, { input: { name: 'stalled' }, key }, takeover);
      try {
        await waitFor(() => heldB.arrived() === 1, 20_000, 'the call that took the key over, upstream');
        heldA.release();
        expect((await a).errors).toBeUndefined();
      } finally {
        heldB.release();
      }
      expect((await b).errors).toBeUndefined();

      requestLogged(gw, stalled);
      const refused = lines(gw, NOT_RENEWED);
      for (const line of refused) expect(line).toMatchObject({ level: 40, idempotencyKey: key, requestId: stalled });
      expect(lines(gw, LOST)).toEqual([expect.objectContaining({ level: 40, requestId: stalled })]);
      noSecrets(gw);
    } finally {
      heldA.release();
    }
  });

  it("a renewal that fails while the call waits upstream: its 'renewal failed' warning names the call", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY, IDEMPOTENCY_TAKEOVER: '300ms', UPSTREAM_TIMEOUT: '10m' });
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    try {
      vi.spyOn(IdempotencyRecords.prototype, 'renew').mockRejectedValue(new Error('the store is away'));
      const requestId = idFor('renewing');
      const answer = send(gw, M.project, { input: { name: 'renewing' }, key: randomUUID() }, requestId);
      await waitFor(() => lines(gw, RENEWAL_FAILED).length > 0, 20_000, 'a renewal that failed');
      vi.restoreAllMocks();
      held.release();
      expect((await answer).errors).toBeUndefined();

      requestLogged(gw, requestId);
      for (const line of lines(gw, RENEWAL_FAILED)) expect(line).toMatchObject({ level: 40, requestId });
      noSecrets(gw);
    } finally {
      held.release();
    }
  });
});
