// A retry after the gateway restarted (a new process on the same DATA_DIR), over another transport than the first call
// and with an equal input written differently: every kind of creation replays from the store with nothing sent (a
// cloud creation, a composite provisioning, an identity registration and an identification), and another input with
// the key is IDEMPOTENCY_KEY_REUSED. The gateway runs as `node src/main.ts`; the cloud upstream is a sandbox in this
// process, so it outlives the gateway and what it receives can be counted.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from '../../src/sandbox/cloud.js';
import { tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type Answer, type Transport } from '../helpers/operation.js';
import { gatewayProcesses, type GatewayProcess } from '../helpers/process.js';

const spawnGateway = gatewayProcesses();
const KEY = 'restart-app-key';

interface Creation {
  field: string;
  query: string;
  input: (n: string) => Record<string, unknown>;
  same: (n: string) => Record<string, unknown>;
  other: (n: string) => Record<string, unknown>;
}

const mutation = (field: string, type: string, selection: string) =>
  `mutation($input: ${type}!, $key: UUID) { ${field}(input: $input, idempotencyKey: $key) ${selection} }`;

const CREATIONS: Creation[] = [
  {
    field: 'createProject',
    query: mutation('createProject', 'CreateProjectInput', '{ project { id } idempotencyKey replayed }'),
    input: (n) => ({ name: n }),
    same: (n) => ({ description: '', name: `${n} ` }),
    other: (n) => ({ name: `${n}-other` }),
  },
  {
    field: 'provisionKafkaCluster',
    query: mutation(
      'provisionKafkaCluster',
      'ProvisionKafkaClusterInput',
      '{ provisioning { id } idempotencyKey replayed }',
    ),
    input: (n) => ({
      project: { name: n },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.66.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    }),
    same: (n) => ({
      zone: 'MSK_AVNTG',
      cluster: { instanceType: 'C2_MEDIUM', title: ' k' },
      subnet: { cidr: ' 10.66.0.0/24 ', title: 'sub' },
      network: { title: 'net', bandwidthMbps: 100 },
      project: { name: n },
    }),
    other: (n) => ({
      project: { name: n },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.67.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    }),
  },
  {
    field: 'registerVerification',
    query: mutation(
      'registerVerification',
      'RegisterVerificationInput',
      '{ verification { id } idempotencyKey replayed }',
    ),
    input: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' }, externalId: n }),
    same: (n) => ({ callback: true, applicant: { lastName: 'Petrova' }, externalId: ` ${n}`, workflowId: 'wf-kyc' }),
    other: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' }, externalId: n }),
  },
  {
    field: 'createIdentification',
    query: mutation(
      'createIdentification',
      'CreateIdentificationInput',
      '{ identification { id url } idempotencyKey replayed }',
    ),
    input: (n) => ({ workflowId: 'wf-id', applicantExternalId: n }),
    same: (n) => ({ environment: 'PRODUCTION', applicantExternalId: n, workflowId: 'wf-id ' }),
    other: (n) => ({ workflowId: 'wf-id', applicantExternalId: n, linkLifetimeInMinutes: 5 }),
  },
];

function payload(answer: Answer, field: string): Record<string, any> {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>)[field];
}

async function stop(p: GatewayProcess): Promise<void> {
  const exited = new Promise((resolve) => p.child.once('exit', resolve));
  p.child.kill('SIGTERM');
  await exited;
}

describe('a retry after a restart, over another transport', () => {
  let cloud: CloudSandbox;
  beforeAll(async () => {
    cloud = await startCloudSandbox();
  });
  afterAll(() => cloud.close());

  it('replays every kind of creation from the store, sends nothing, and refuses another input', async () => {
    const dataDir = tempDataDir();
    const env = {
      DATA_DIR: dataDir,
      CLOUD_API_URL: cloud.url,
      CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
      GATEWAY_API_KEYS: KEY,
    };
    const calls = CREATIONS.map((c) => ({ c, key: randomUUID(), n: `restart-${randomUUID()}` }));
    const before = await spawnGateway(env);
    const firsts: Record<string, any>[] = [];
    for (const { c, key, n } of calls) {
      const answer = await operationOver('ws', before as unknown as TestGateway, KEY, {
        query: c.query,
        variables: { input: c.input(n), key },
      });
      firsts.push(payload(answer, c.field));
    }
    // Let the provisioning finish before the restart (its resume is test/upstream/takeover-across-replicas.test.ts's).
    const provisioning = firsts[1]!.provisioning.id as string;
    const state = async (url: string) =>
      (
        (await operationOver('post', { url } as TestGateway, KEY, {
          query: 'query($id: ID!) { provisioning(id: $id) { state } }',
          variables: { id: provisioning },
        })) as { data?: { provisioning: { state: string } } }
      ).data?.provisioning.state;
    await expect.poll(() => state(before.url), { timeout: 20_000 }).toBe('SUCCEEDED');
    await stop(before);
    const sent = cloud.requests.length;

    const after = (await spawnGateway(env)) as unknown as TestGateway;
    for (const [i, { c, key, n }] of calls.entries()) {
      for (const transport of ['post', 'sse'] as Transport[]) {
        const again = await operationOver(transport, after, KEY, {
          query: c.query,
          variables: { input: c.same(n), key: key.toUpperCase() },
        });
        expect(payload(again, c.field), `${c.field} over ${transport}`).toEqual({ ...firsts[i], replayed: true });
      }
      const reused = await operationOver('ws', after, KEY, { query: c.query, variables: { input: c.other(n), key } });
      expect(reused.errors?.[0]?.extensions?.code, reused.raw).toBe('IDEMPOTENCY_KEY_REUSED');
    }
    expect(cloud.requests.length).toBe(sent);
  }, 120_000);
});
