import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';

import { ConfigError, loadConfig } from '../../src/config/index.js';
import { cloudShapeByName } from '../../src/sandbox/cloud-shapes.js';
import {
  PROJECTS_PATH,
  SANDBOX_SERVICE_ACCOUNT_TOKEN,
  SERVICES_PATH,
  startCloudSandbox,
  type CloudSandbox,
} from '../../src/sandbox/cloud.js';
import { M, ok } from '../helpers/cloud.js';
import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { gatewayProcesses } from '../helpers/process.js';

/**
 * A 2xx from the cloud API is a creation even when the gateway cannot read its id (docs/contract.md, "Shapes a spec does not
 * show"; docs/decisions/042). The sandbox answers in shapes beyond the gateway's guesses (SANDBOX_CLOUD_SHAPE
 * `uuid+…`, `resource.uuid+…`, `items.0.id+…`): without a configured path the gateway must fail loudly and keep the
 * answer, with the path it must read the id and record the resource.
 */

const gateway = gatewaysPerTest();
const processes = gatewayProcesses();
const sandboxes: CloudSandbox[] = [];
afterEach(async () => {
  await Promise.all(sandboxes.splice(0).map((s) => s.close()));
});

const API_KEY = 'unreadable-id-app';

/** A cloud sandbox of its own (it outlives the gateways of one test, as a real cloud does), answering in `shape`. */
async function cloudSandbox(shape: string): Promise<CloudSandbox> {
  const s = await startCloudSandbox({ responseShape: cloudShapeByName(shape)!.shape });
  sandboxes.push(s);
  return s;
}

/** A gateway on `sandbox` as its real cloud API, the other upstreams simulated in-process, data in `dataDir`. */
function gatewayOn(sandbox: CloudSandbox, dataDir: string, env: Record<string, string> = {}): Promise<TestGateway> {
  return gateway({
    DATA_DIR: dataDir,
    CLOUD_API_URL: sandbox.url,
    CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
    SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    GATEWAY_API_KEYS: API_KEY,
    ...env,
  });
}

const creationRequests = (s: CloudSandbox, path: string) =>
  s.requests.filter((r) => r.method === 'POST' && r.path === path).length;
/** The Idempotency-Key the sandbox got on its first creation request at `path`. */
const sentKey = (s: CloudSandbox, path: string) =>
  s.requests.find((r) => r.method === 'POST' && r.path === path)!.headers['idempotency-key'];

describe('a cloud creation whose id the gateway cannot read', () => {
  it('answers UPSTREAM_ANSWER_INCOMPLETE with the upstream key and the kept answer, never UPSTREAM_REJECTED', async () => {
    const sandbox = await cloudSandbox('uuid+access_token+address');
    const gw = await gatewayOn(sandbox, tempDataDir());
    const key = randomUUID();
    const res = await gw.graphql(M.project, { input: { name: 'billed-anyway' }, key }, { key: API_KEY });

    expect(res.data?.createProject ?? null).toBeNull();
    const error = res.errors![0]!;
    expect(error.extensions).toMatchObject({
      code: 'UPSTREAM_ANSWER_INCOMPLETE',
      upstream: 'cloud',
      status: 201,
      variable: 'CLOUD_CREATED_ID_PATH',
      idempotencyKey: key,
      upstreamIdempotencyKey: sentKey(sandbox, PROJECTS_PATH),
    });
    // The whole answer is there for the operator, who finds the id in it.
    const created = sandbox.projects();
    expect(created).toHaveLength(1);
    expect(error.extensions!.answer).toMatchObject({ uuid: created[0]!.id, name: 'billed-anyway' });
    expect(error.message).toContain('CLOUD_CREATED_ID_PATH');
    expect(error.message).toContain('id, serviceId, data.id, metadata.id');
  });

  it('keeps the record: a retry with the same key replays the same error without a second upstream creation', async () => {
    const sandbox = await cloudSandbox('resource.uuid+access_token+address');
    const gw = await gatewayOn(sandbox, tempDataDir());
    const key = randomUUID();
    const first = await gw.graphql(M.project, { input: { name: 'once' }, key }, { key: API_KEY });
    expect(first.errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');

    const again = await gw.graphql(M.project, { input: { name: 'once' }, key }, { key: API_KEY });
    expect(again.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_ANSWER_INCOMPLETE',
      idempotencyKey: key,
      upstreamIdempotencyKey: sentKey(sandbox, PROJECTS_PATH),
    });
    expect(again.errors![0]!.extensions!.answer).toEqual(first.errors![0]!.extensions!.answer);
    expect(sandbox.projects()).toHaveLength(1);
    expect(creationRequests(sandbox, PROJECTS_PATH), 'nothing is sent again').toBe(1);

    // The key stays bound to that request: it was not released.
    const other = await gw.graphql(M.project, { input: { name: 'another' }, key }, { key: API_KEY });
    expect(other.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(creationRequests(sandbox, PROJECTS_PATH)).toBe(1);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(/gateway_upstream_answers_incomplete_total\{operation="createProject"\} 1/);
  });

  it('is recorded once CLOUD_CREATED_ID_PATH is configured: the retry with the same key reads the kept answer, and the project is in the ledger', async () => {
    const sandbox = await cloudSandbox('items.0.id+access_token+address');
    const dataDir = tempDataDir();
    const key = randomUUID();
    const before = await gatewayOn(sandbox, dataDir);
    expect(
      (await before.graphql(M.project, { input: { name: 'completed-later' }, key }, { key: API_KEY })).errors![0]!
        .extensions!.code,
    ).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    await before.close();

    const after = await gatewayOn(sandbox, dataDir, { CLOUD_CREATED_ID_PATH: 'items.0.id' });
    const payload = await ok(after, M.project, { input: { name: 'completed-later' }, key }, API_KEY);
    const upstreamId = sandbox.projects()[0]!.id;
    expect(payload).toMatchObject({
      project: { id: upstreamId, name: 'completed-later' },
      replayed: true,
      upstreamIdempotencyKey: sentKey(sandbox, PROJECTS_PATH),
    });
    expect(creationRequests(sandbox, PROJECTS_PATH), 'read from the kept answer, not sent again').toBe(1);
    expect((await after.gateway.services.ledger.get(upstreamId))?.kind).toBe('project');
    const read = await after.graphql(
      `query($id: ID!) { project(id: $id) { id name } }`,
      { id: upstreamId },
      { key: API_KEY },
    );
    expect(read.data!.project).toEqual({ id: upstreamId, name: 'completed-later' });
    // And from then on it is an ordinary replay.
    expect((await ok(after, M.project, { input: { name: 'completed-later' }, key }, API_KEY)).replayed).toBe(true);
    expect(sandbox.projects()).toHaveLength(1);
  });
});

// Every cloud flow in the shapes beyond the guesses, with the paths configured: test/cloud/response-shapes.test.ts.
describe('a token the gateway does not guess', () => {
  it('without a path, a token the gateway cannot find fails the call saying which variable to set', async () => {
    const gw = await gateway({
      SANDBOX_CLOUD_SHAPE: 'id+iamToken+address',
      CLOUD_API_CREDENTIALS: JSON.stringify({ keyId: 'k', secret: 's' }),
    });
    const res = await gw.graphql(M.project, { input: { name: 'no-token' } });
    expect(res.errors![0]!.extensions!.code).toBe('UPSTREAM_UNAUTHENTICATED');
    expect(res.errors![0]!.message).toContain('CLOUD_TOKEN_PATH');
    expect(gw.gateway.sandbox.cloud!.projects()).toHaveLength(0);
  });
});

describe('a composite provisioning stopped on an unreadable id', () => {
  const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) { provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed } }`;
  const STATE = `query($id: ID!) { provisioning(id: $id) { state steps { name state resourceId idempotencyKey error { code status } } } }`;
  const input = {
    project: { name: 'prov-paths' },
    network: { title: 'prov-net', bandwidthMbps: 100 },
    subnet: { title: 'prov-subnet', cidr: '10.40.0.0/24' },
    cluster: { title: 'prov-kafka', instanceType: 'C2_MEDIUM', instanceCount: 3 },
    topics: [{ name: 'orders', partitions: 3, replicationFactor: 3 }],
  };
  const settle = async (gw: TestGateway, id: string) => {
    await gw.gateway.services.provisioning.idle();
    return (await gw.graphql(STATE, { id }, { key: API_KEY })).data!.provisioning as {
      state: string;
      steps: Array<{
        name: string;
        state: string;
        resourceId: string | null;
        idempotencyKey: string | null;
        error: { code: string; status: number | null } | null;
      }>;
    };
  };

  it('fails on that step with UPSTREAM_ANSWER_INCOMPLETE, and resumes to the end once CLOUD_CREATED_ID_PATH is configured, creating nothing twice', async () => {
    const sandbox = await cloudSandbox('uuid+access_token+address');
    const dataDir = tempDataDir();
    const key = randomUUID();
    const before = await gatewayOn(sandbox, dataDir);
    const started = await ok(before, PROVISION, { input, key }, API_KEY);
    const failed = await settle(before, started.provisioning.id);
    expect(failed.state).toBe('FAILED');
    expect(failed.steps[0]).toMatchObject({
      name: 'project',
      state: 'FAILED',
      error: { code: 'UPSTREAM_ANSWER_INCOMPLETE', status: 201 },
    });
    expect(sandbox.projects()).toHaveLength(1);
    // Calling again without the path: the step replays its kept answer, and still nothing is created twice.
    await ok(before, PROVISION, { input, key }, API_KEY);
    expect((await settle(before, started.provisioning.id)).steps[0]!.error!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    expect(creationRequests(sandbox, PROJECTS_PATH)).toBe(1);
    await before.close();

    const after = await gatewayOn(sandbox, dataDir, { CLOUD_CREATED_ID_PATH: 'uuid' });
    await ok(after, PROVISION, { input, key }, API_KEY);
    const done = await settle(after, started.provisioning.id);
    expect(done.state, JSON.stringify(done.steps)).toBe('SUCCEEDED');
    expect(done.steps[0]).toMatchObject({ name: 'project', state: 'DONE', resourceId: sandbox.projects()[0]!.id });
    expect(sandbox.projects()).toHaveLength(1);
    expect(creationRequests(sandbox, PROJECTS_PATH)).toBe(1);
    // network, subnet, cluster, topic: each created once.
    expect(sandbox.resources()).toHaveLength(4);
    expect(creationRequests(sandbox, SERVICES_PATH)).toBe(4);
    for (const step of done.steps.filter((s) => s.state === 'DONE'))
      expect((await after.gateway.services.ledger.get(step.resourceId!))?.id).toBe(step.resourceId);
  });
});

describe('the start-up line', () => {
  it('says, for each unshown shape, which configured path or which guesses are in force', async () => {
    const gw = await processes({
      DATA_DIR: tempDataDir(),
      CLOUD_CREATED_ID_PATH: 'data.uuid',
      VERIFICATION_RESULTS_PATH: 'payload.entries',
    });
    const line = JSON.parse(gw.line) as { msg: string; shapes: Record<string, string> };
    expect(line.shapes).toEqual({
      cloudCreatedId: 'CLOUD_CREATED_ID_PATH=data.uuid',
      cloudToken: expect.stringMatching(/^guesses access_token, accessToken, token/),
      cloudIpAddress: expect.stringMatching(/^guesses address, ip, ipAddress/),
      verificationExternalId: expect.stringMatching(/^guesses verificationExternalId, externalId, id/),
      verificationResults: 'VERIFICATION_RESULTS_PATH=payload.entries',
      verificationCallbackUrl: 'sent as callbackUrl',
    });
    expect(line.msg).toContain('answer shapes: cloud created id CLOUD_CREATED_ID_PATH=data.uuid; cloud token guesses');
  });
});

describe('a bad *_PATH variable', () => {
  it.each([
    ['CLOUD_CREATED_ID_PATH', 'data..uuid'],
    ['CLOUD_TOKEN_PATH', '.iamToken'],
    ['CLOUD_IP_ADDRESS_PATH', 'addresses.0.'],
    ['VERIFICATION_EXTERNAL_ID_PATH', 'data uuid'],
    ['VERIFICATION_RESULTS_PATH', 'payload..entries'],
    ['VERIFICATION_CALLBACK_URL_PATH', 'callback.'],
  ])('%s=%s stops start-up with a message naming the variable and how to write a path', (variable, value) => {
    let error: unknown;
    try {
      loadConfig({ DATA_DIR: tempDataDir(), [variable]: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(variable);
    expect((error as ConfigError).message).toMatch(new RegExp(`^${variable}: .*is not a dot path.*data\\.uuid`));
  });

  it('stops the gateway process before it listens, exit code 2, naming the variable', async () => {
    await expect(processes({ DATA_DIR: tempDataDir(), CLOUD_CREATED_ID_PATH: 'data..uuid' })).rejects.toThrow(
      /exited \(2\) before it was ready:[\s\S]*CLOUD_CREATED_ID_PATH: "data\.\.uuid" is not a dot path: segment 2 is empty/,
    );
  });

  it('accepts a dot path with array indexes, and leaves the guesses in force when unset', () => {
    const config = loadConfig({ DATA_DIR: tempDataDir(), CLOUD_CREATED_ID_PATH: ' items.0.id ' });
    expect(config.shapePaths.cloudCreatedId).toEqual({ text: 'items.0.id', segments: ['items', '0', 'id'] });
    expect(config.shapePaths.cloudToken).toBeNull();
  });
});
