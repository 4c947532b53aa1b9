import { createHash, randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';

import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from '../../src/sandbox/cloud.js';
import { upstreamKey } from '../../src/upstream/idempotency.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest, startTestGateway, tempDataDir } from '../helpers/gateway.js';

/**
 * The upstream Idempotency-Key is UUIDv5 of the caller's scope and key (docs/decisions/010): two apps that pick the
 * same key never meet upstream, and the key a call sends is the same after a restart.
 */
const gateway = gatewaysPerTest();
const KEYS = { GATEWAY_API_KEYS: 'key-app-a,key-app-b' };
const PROJECTS = '/apis/projects/public/v4/projects';
const REGISTRATIONS = '/api/v2/verifications/workflow-instances';
const REGISTER = `mutation($key: UUID) {
  registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Same" } }, idempotencyKey: $key) {
    verification { externalId } idempotencyKey upstreamIdempotencyKey replayed
  }
}`;

/** A cloud upstream that outlives the gateway restarts of a test, as a real one does. */
const clouds: CloudSandbox[] = [];
afterEach(async () => {
  await Promise.all(clouds.splice(0).map((c) => c.close()));
});
async function externalCloud(): Promise<{ cloud: CloudSandbox; env: Record<string, string> }> {
  const cloud = await startCloudSandbox();
  clouds.push(cloud);
  return {
    cloud,
    env: {
      CLOUD_API_URL: cloud.url,
      CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    },
  };
}

describe('the Idempotency-Key sent upstream', () => {
  it('two apps that send the same idempotency key create two resources upstream, each under its own derived key', async () => {
    const gw = await gateway(KEYS);
    const key = randomUUID();
    const a = await gw.graphql(M.project, { input: { name: 'same' }, key }, { key: 'key-app-a' });
    const b = await gw.graphql(M.project, { input: { name: 'same' }, key }, { key: 'key-app-b' });
    expect(a.errors).toBeUndefined();
    expect(b.errors).toBeUndefined();
    const pa = a.data!.createProject;
    const pb = b.data!.createProject;
    expect([pa.idempotencyKey, pb.idempotencyKey]).toEqual([key, key]);
    expect([pa.replayed, pb.replayed]).toEqual([false, false]);
    expect(pa.project.id).not.toBe(pb.project.id);

    const calls = gw.gateway.sandbox.cloud!.requests.filter((r) => r.path === PROJECTS);
    expect(calls.map((c) => c.status)).toEqual([201, 201]);
    expect(calls.map((c) => c.headers['idempotency-key'])).toEqual([
      pa.upstreamIdempotencyKey,
      pb.upstreamIdempotencyKey,
    ]);
    expect(pa.upstreamIdempotencyKey).not.toBe(pb.upstreamIdempotencyKey);
    expect([pa.upstreamIdempotencyKey, pb.upstreamIdempotencyKey]).not.toContain(key);
  });

  it('two apps that send the same idempotency key register two verifications upstream', async () => {
    const gw = await gateway(KEYS);
    const key = randomUUID();
    const a = await gw.graphql(REGISTER, { key }, { key: 'key-app-a' });
    const b = await gw.graphql(REGISTER, { key }, { key: 'key-app-b' });
    expect([a.errors, b.errors]).toEqual([undefined, undefined]);
    const ids = [
      a.data!.registerVerification.verification.externalId,
      b.data!.registerVerification.verification.externalId,
    ];
    expect(new Set(ids).size).toBe(2);
    const calls = gw.gateway.sandbox.verification!.requests.filter((r) => r.path === REGISTRATIONS);
    expect(calls).toHaveLength(2);
    expect(new Set(calls.map((c) => c.headers['idempotency-key'])).size).toBe(2);
    expect(gw.gateway.sandbox.verification!.verifications().filter((v) => ids.includes(v.externalId))).toHaveLength(2);
  });

  it('a call retried after a restart sends the same derived key upstream', async () => {
    const { cloud, env } = await externalCloud();
    const dataDir = tempDataDir();
    const key = randomUUID();
    const first = await startTestGateway({ ...KEYS, ...env, DATA_DIR: dataDir, UPSTREAM_MAX_RETRIES: '1' });
    const unavailable = { status: 503, retryAfterSeconds: null };
    cloud.faults.enqueue(unavailable, unavailable);
    const failed = await first.graphql(M.project, { input: { name: 'across-restart' }, key }, { key: 'key-app-a' });
    expect(failed.errors![0]!.extensions!.code).toBe('UPSTREAM_UNAVAILABLE');
    await first.close();

    const second = await gateway({ ...KEYS, ...env, DATA_DIR: dataDir });
    const done = await second.graphql(M.project, { input: { name: 'across-restart' }, key }, { key: 'key-app-a' });
    expect(done.errors).toBeUndefined();
    const derived = done.data!.createProject.upstreamIdempotencyKey;
    const sent = cloud.requests.filter((r) => r.path === PROJECTS);
    expect(sent.map((r) => `${r.status} ${r.headers['idempotency-key']}`)).toEqual([
      `503 ${derived}`,
      `503 ${derived}`,
      `201 ${derived}`,
    ]);
    // The derivation is a pure function of the scope and the key: any replica computes the same one.
    expect(derived).toBe(
      upstreamKey(`key:${createHash('sha256').update('key-app-a').digest('hex').slice(0, 16)}`, key),
    );
  });

  it('a provisioning resumed after a restart sends every step the same derived key again', async () => {
    const dataDir = tempDataDir();
    const key = randomUUID();
    const input = {
      project: { name: 'resume' },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.70.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    };
    const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
      provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id steps { name idempotencyKey } } idempotencyKey upstreamIdempotencyKey }
    }`;
    const STEPS = `query($id: ID!) { provisioning(id: $id) { state steps { name state idempotencyKey } } }`;
    const { cloud, env } = await externalCloud();
    const first = await startTestGateway({ ...KEYS, ...env, DATA_DIR: dataDir, UPSTREAM_MAX_RETRIES: '0' });
    // The project and the network are created; the subnet (the second service request) fails.
    let services = 0;
    cloud.faults.enqueueFor((path) => path.endsWith('/services') && ++services === 2, {
      status: 503,
      retryAfterSeconds: null,
    });
    const started = await first.graphql(PROVISION, { input, key }, { key: 'key-app-a' });
    expect(started.errors).toBeUndefined();
    const id = started.data!.provisionKafkaCluster.provisioning.id;
    await first.gateway.services.provisioning.idle();
    const failed = (await first.graphql(STEPS, { id }, { key: 'key-app-a' })).data!.provisioning;
    expect(failed.state).toBe('FAILED');
    const keysBefore = cloud.requests.map((r) => r.headers['idempotency-key']);
    await first.close();

    const second = await gateway({ ...KEYS, ...env, DATA_DIR: dataDir });
    const resumed = await second.graphql(PROVISION, { input, key }, { key: 'key-app-a' });
    expect(resumed.errors).toBeUndefined();
    expect(resumed.data!.provisionKafkaCluster.upstreamIdempotencyKey).toBe(
      started.data!.provisionKafkaCluster.upstreamIdempotencyKey,
    );
    await second.gateway.services.provisioning.idle();
    const done = (await second.graphql(STEPS, { id }, { key: 'key-app-a' })).data!.provisioning;
    expect(done.state).toBe('SUCCEEDED');
    const stepKeys = new Map<string, string>(
      done.steps.map((s: { name: string; idempotencyKey: string }) => [s.name, s.idempotencyKey]),
    );
    // Before the restart: project, network, then the failed subnet; after it: the subnet again, then the cluster.
    expect(keysBefore).toEqual([stepKeys.get('project'), stepKeys.get('network'), stepKeys.get('subnet')]);
    expect(cloud.requests.slice(keysBefore.length).map((r) => r.headers['idempotency-key'])).toEqual([
      stepKeys.get('subnet'),
      stepKeys.get('kafkaCluster'),
    ]);
    expect(cloud.requests.map((r) => r.status)).toEqual([201, 201, 503, 201, 201]);
    expect(new Set(stepKeys.values()).size).toBe(stepKeys.size);
  });
});
