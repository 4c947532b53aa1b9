import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { ConfigError, loadConfig } from '../../src/config/index.js';
import { upstreamKey } from '../../src/upstream/idempotency.js';
import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayProcesses } from '../helpers/process.js';

/**
 * One circuit breaker per upstream (docs/decisions/056), against the real gateway and the cloud sandbox's fault
 * injection. Each call makes one attempt (UPSTREAM_MAX_RETRIES=0, unless a test is about retries), so the sample of
 * 3 attempts opens on its second failure of three. The breakers' clock is the test's: moving it past the reset
 * timeout is how a test gets to half-open, never a wait.
 */
const PROJECTS = '/apis/projects/public/v4/projects';
const UNAVAILABLE = { status: 503, retryAfterSeconds: null };

let clock = Date.now();
const started: TestGateway[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.close()));
});

async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  clock = Date.now();
  const gw = await startTestGateway(
    {
      UPSTREAM_MAX_RETRIES: '0',
      UPSTREAM_CIRCUIT_VOLUME: '3',
      UPSTREAM_CIRCUIT_RESET_TIMEOUT: '30s',
      UPSTREAM_CIRCUIT_HALF_OPEN_ATTEMPTS: '2',
      ...env,
    },
    { testing: { clock: () => clock } },
  );
  started.push(gw);
  return gw;
}

const projectCalls = (gw: TestGateway) => gw.gateway.sandbox.cloud!.requests.filter((r) => r.path === PROJECTS);
const metrics = async (gw: TestGateway) => (await request(`${gw.url}/metrics`)).body.text();
const readyz = async (gw: TestGateway) => {
  const res = await request(`${gw.url}/readyz`);
  return {
    status: res.statusCode,
    body: (await res.body.json()) as { status: string; circuits: Record<string, string> },
  };
};
const create = (gw: TestGateway, name: string, key?: string) =>
  gw.graphql(M.project, { input: { name }, ...(key ? { key } : {}) });

/** Failed attempts on the cloud API until its circuit opens (at most three: the sample's size). */
async function openCloudCircuit(gw: TestGateway): Promise<void> {
  const faults = gw.gateway.sandbox.cloud!.faults;
  faults.enqueueFor(PROJECTS, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE);
  for (let i = 0; gw.gateway.circuits().cloud !== 'open'; i++) {
    expect(i).toBeLessThan(3);
    const res = await create(gw, `failing ${i}`);
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'cloud', attempts: 1 });
  }
  faults.clear();
}

describe('a circuit breaker per upstream', () => {
  it('opens once its sample of attempts is full and more than half of it failed, and /metrics shows the state and transition', async () => {
    const gw = await gateway();
    gw.gateway.sandbox.cloud!.faults.enqueueFor(PROJECTS, UNAVAILABLE);
    expect((await create(gw, 'first failure')).errors![0]!.extensions!.code).toBe('UPSTREAM_UNAVAILABLE');
    expect((await create(gw, 'a success')).errors).toBeUndefined();
    expect(gw.gateway.circuits().cloud).toBe('closed');
    gw.gateway.sandbox.cloud!.faults.enqueueFor(PROJECTS, UNAVAILABLE);
    expect((await gw.graphql(M.project, { input: { name: 'second failure' } })).errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      attempts: 1,
    });
    expect(gw.gateway.circuits().cloud).toBe('open');
    const text = await metrics(gw);
    expect(text).toContain('gateway_upstream_circuit_state{upstream="cloud"} 1');
    expect(text).toContain('gateway_upstream_circuit_state{upstream="verification"} 0');
    expect(text).toContain('gateway_upstream_circuit_transitions_total{upstream="cloud",from="closed",to="open"} 1');
  });

  it('refuses at once while open with UPSTREAM_UNAVAILABLE, retryAfter and sent: false, sending nothing upstream', async () => {
    const gw = await gateway();
    await openCloudCircuit(gw);
    const before = projectCalls(gw).length;
    clock += 10_000;
    const res = await create(gw, 'refused');
    expect(res.errors![0]!.extensions).toEqual({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: 'cloud',
      circuit: 'open',
      retryAfter: 20,
      attempts: 0,
      sent: false,
    });
    expect(res.errors![0]!.message).toContain('not sent');
    expect(projectCalls(gw)).toHaveLength(before);
    expect(await metrics(gw)).toContain('gateway_upstream_circuit_short_circuits_total{upstream="cloud"} 1');
  });

  it('ends the retries of a call once the circuit opens during them', async () => {
    const gw = await gateway({ UPSTREAM_MAX_RETRIES: '4' });
    // 503 with Retry-After: 0 is "not processed", so the refusal can say nothing was applied.
    const notProcessed = { status: 503, retryAfterSeconds: 0 };
    gw.gateway.sandbox.cloud!.faults.enqueueFor(
      PROJECTS,
      notProcessed,
      notProcessed,
      notProcessed,
      notProcessed,
      notProcessed,
    );
    const res = await create(gw, 'retried');
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      circuit: 'open',
      attempts: 3,
      sent: false,
    });
    expect(projectCalls(gw)).toHaveLength(3);
  });

  it('keeps a 429 apart: it never opens the circuit', async () => {
    const gw = await gateway();
    const tooMany = { status: 429, retryAfterSeconds: 0 };
    gw.gateway.sandbox.cloud!.faults.enqueueFor(PROJECTS, tooMany, tooMany, tooMany, tooMany, tooMany);
    for (let i = 0; i < 5; i++)
      expect((await create(gw, `busy ${i}`)).errors![0]!.extensions!.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(gw.gateway.circuits().cloud).toBe('closed');
    expect((await create(gw, 'after')).errors).toBeUndefined();
    expect(projectCalls(gw)).toHaveLength(6);
  });

  it('half-open lets a bounded number of trial calls through at once and refuses the others at once', async () => {
    const gw = await gateway();
    await openCloudCircuit(gw);
    clock += 30_000;
    const before = projectCalls(gw).length;
    // The upstream holds the trials: "in flight" is a state the test controls, not a duration.
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    const trials = [create(gw, 'trial 1'), create(gw, 'trial 2')];
    await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBe(2);
    expect(gw.gateway.circuits().cloud).toBe('half-open');
    const third = await create(gw, 'third');
    expect(third.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      circuit: 'half-open',
      retryAfter: 1,
      sent: false,
    });
    held.release();
    for (const t of await Promise.all(trials)) expect(t.errors).toBeUndefined();
    expect(projectCalls(gw)).toHaveLength(before + 2);
  });

  it('closes after as many successful trials as HALF_OPEN_ATTEMPTS, and then sends every call again', async () => {
    const gw = await gateway();
    await openCloudCircuit(gw);
    clock += 30_000;
    expect((await create(gw, 'trial 1')).errors).toBeUndefined();
    expect(gw.gateway.circuits().cloud).toBe('half-open');
    expect((await create(gw, 'trial 2')).errors).toBeUndefined();
    expect(gw.gateway.circuits().cloud).toBe('closed');
    for (const name of ['c1', 'c2', 'c3', 'c4']) expect((await create(gw, name)).errors).toBeUndefined();
    const text = await metrics(gw);
    expect(text).toContain('gateway_upstream_circuit_transitions_total{upstream="cloud",from="open",to="half-open"} 1');
    expect(text).toContain(
      'gateway_upstream_circuit_transitions_total{upstream="cloud",from="half-open",to="closed"} 1',
    );
    expect(text).toContain('gateway_upstream_circuit_state{upstream="cloud"} 0');
  });

  it('opens again for a whole reset timeout when a trial fails', async () => {
    const gw = await gateway();
    await openCloudCircuit(gw);
    clock += 30_000;
    gw.gateway.sandbox.cloud!.faults.enqueueFor(PROJECTS, UNAVAILABLE);
    expect((await create(gw, 'failed trial')).errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      attempts: 1,
    });
    const before = projectCalls(gw).length;
    const res = await create(gw, 'refused again');
    expect(res.errors![0]!.extensions).toMatchObject({ circuit: 'open', retryAfter: 30, sent: false });
    expect(projectCalls(gw)).toHaveLength(before);
  });

  it('refuses a creation while open without keeping its key, then sends it exactly once when retried with that key', async () => {
    const gw = await gateway();
    await openCloudCircuit(gw);
    const key = randomUUID();
    const refused = await create(gw, 'keyed', key);
    expect(refused.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      circuit: 'open',
      sent: false,
    });
    const withKey = () => projectCalls(gw).filter((r) => r.headers['idempotency-key'] === upstreamKey('open', key));
    expect(withKey()).toHaveLength(0);
    clock += 30_000;
    const sent = await create(gw, 'keyed', key);
    expect(sent.data!.createProject).toMatchObject({ idempotencyKey: key, replayed: false });
    const again = await create(gw, 'keyed', key);
    expect(again.data!.createProject).toEqual({ ...sent.data!.createProject, replayed: true });
    expect(withKey()).toHaveLength(1);
    expect(gw.gateway.sandbox.cloud!.projects().filter((p) => p.name === 'keyed')).toHaveLength(1);
  });

  it('answers a read of the ledger while the circuit is open, without the upstream', async () => {
    const gw = await gateway();
    const created = await create(gw, 'kept');
    const id = created.data!.createProject.project.id as string;
    await openCloudCircuit(gw);
    const before = gw.gateway.sandbox.cloud!.requests.length;
    const res = await gw.graphql(`query($id: ID!) { project(id: $id) { id name } projects { id } }`, { id });
    expect(res.errors).toBeUndefined();
    expect(res.data!.project).toEqual({ id, name: 'kept' });
    expect(res.data!.projects).toEqual([{ id }]);
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(before);
  });

  it('shows each breaker in /readyz, and stays ready while one is open', async () => {
    const gw = await gateway({ UPSTREAM_CIRCUIT_BREAKER: 'on,rfm=off' });
    await openCloudCircuit(gw);
    const ready = await readyz(gw);
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('ready');
    expect(ready.body.circuits).toEqual({
      cloud: 'open',
      'cloud-token': 'closed',
      identification: 'closed',
      'identification-prodlike': 'closed',
      verification: 'closed',
      rfm: 'off',
    });
  });

  it('counts a timeout of an identity upstream and refuses its next registration at once', async () => {
    const gw = await gateway({ UPSTREAM_TIMEOUT: '200ms' });
    const verification = gw.gateway.sandbox.verification!;
    const path = '/api/v2/verifications/workflow-instances';
    verification.faults.enqueueFor(path, 'timeout', 'timeout', 'timeout');
    const register = (lastName: string) =>
      gw.graphql(
        `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`,
        {
          input: { workflowId: 'wf-kyc', applicant: { lastName } },
        },
      );
    for (const name of ['t1', 't2', 't3'])
      expect((await register(name)).errors![0]!.extensions!.code).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    const before = verification.requests.filter((r) => r.path === path).length;
    const refused = await register('t4');
    expect(refused.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: 'verification',
      circuit: 'open',
      sent: false,
    });
    expect(verification.requests.filter((r) => r.path === path)).toHaveLength(before);
    expect(gw.gateway.circuits().cloud).toBe('closed');
  });

  it('gives the cloud token endpoint a breaker of its own: while it is open a creation is refused before anything is sent', async () => {
    const gw = await gateway({
      CLOUD_API_CREDENTIALS: JSON.stringify({ login: 'svc', password: 'cloud-cred-secret' }),
      UPSTREAM_CIRCUIT_VOLUME: '3,cloud-token=2',
    });
    const cloud = gw.gateway.sandbox.cloud!;
    cloud.faults.enqueueFor('/iam/v2/tokens', UNAVAILABLE, UNAVAILABLE);
    for (const name of ['t1', 't2'])
      expect((await create(gw, name)).errors![0]!.extensions).toMatchObject({
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'cloud-token',
      });
    expect(gw.gateway.circuits()['cloud-token']).toBe('open');
    // The creation endpoints' breaker did not count the token's failures: nothing was sent to them.
    expect(gw.gateway.circuits().cloud).toBe('closed');
    const before = cloud.requests.length;
    const refused = await create(gw, 'refused');
    expect(refused.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: 'cloud-token',
      circuit: 'open',
      sent: false,
    });
    expect(cloud.requests).toHaveLength(before);
    expect(projectCalls(gw)).toHaveLength(0);
  });

  it('never refuses on an upstream whose breaker is turned off', async () => {
    const gw = await gateway({ UPSTREAM_CIRCUIT_BREAKER: 'on,cloud=off' });
    gw.gateway.sandbox.cloud!.faults.enqueueFor(PROJECTS, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE);
    for (let i = 0; i < 4; i++)
      expect((await create(gw, `f${i}`)).errors![0]!.extensions).not.toHaveProperty('circuit');
    expect(projectCalls(gw)).toHaveLength(4);
    expect(gw.gateway.circuits().cloud).toBe('off');
  });
});

describe('breaker settings', () => {
  it('takes a value for every upstream and overrides per upstream', () => {
    const config = loadConfig({
      UPSTREAM_CIRCUIT_RESET_TIMEOUT: '1m,rfm=10s',
      UPSTREAM_CIRCUIT_ERROR_THRESHOLD: 'cloud=0.25',
    });
    expect(config.upstream.breakers.cloud).toEqual({
      enabled: true,
      volume: 5,
      errorThreshold: 0.25,
      resetTimeoutMs: 60_000,
      halfOpenAttempts: 10,
    });
    expect(config.upstream.breakers.rfm).toMatchObject({ errorThreshold: 0.5, resetTimeoutMs: 10_000 });
    expect(config.upstream.breakers['cloud-token']).toMatchObject({ resetTimeoutMs: 60_000 });
  });

  it.each([
    ['UPSTREAM_CIRCUIT_BREAKER', 'maybe', 'must be on or off'],
    ['UPSTREAM_CIRCUIT_BREAKER', 'on,mobile-id=off', '"mobile-id" is not an upstream with a breaker'],
    ['UPSTREAM_CIRCUIT_ERROR_THRESHOLD', '1', 'must be a share between 0 and 1'],
    ['UPSTREAM_CIRCUIT_VOLUME', '0', 'must be an integer from 1 to 1000'],
    ['UPSTREAM_CIRCUIT_RESET_TIMEOUT', '500ms', 'at least 1s'],
    ['UPSTREAM_CIRCUIT_HALF_OPEN_ATTEMPTS', '3,cloud=2,cloud=4', 'cloud is given twice'],
  ])('refuses %s=%s naming the variable and the entry', (name, value, message) => {
    let error: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(name);
    expect((error as ConfigError).message).toContain(message);
  });
});

describe('the start-up line', () => {
  const start = gatewayProcesses();
  it('shows each breaker with its settings', async () => {
    const gw = await start({
      UPSTREAM_CIRCUIT_BREAKER: 'on,rfm=off',
      UPSTREAM_CIRCUIT_RESET_TIMEOUT: '30s,cloud=1m',
      DATA_DIR: (await import('../helpers/gateway.js')).tempDataDir(),
    });
    const line = JSON.parse(gw.line) as { msg: string; circuits: Record<string, string> };
    expect(line.circuits).toMatchObject({
      cloud: 'closed',
      'cloud-token': 'closed',
      verification: 'closed',
      rfm: 'off',
    });
    expect(line.msg).toContain('circuits cloud=closed (opens past 50% of 5 attempts, reset 60s, 10 trials)');
    expect(line.msg).toContain('identification=closed (opens past 50% of 5 attempts, reset 30s, 10 trials)');
    expect(line.msg).toContain('rfm=off');
  });
});
