// The promise of docs/contract.md: bad input of any kind gets a clear, specific error, changes nothing and crashes
// nothing. A table of refusals over real HTTP, each checked for what an app or an operator could see change: the
// rate-limit points spent (gateway_rate_limit_points_total), the rows of every table that holds what the gateway
// created or received, the app's storage counts, the upstream calls; and the idempotency key a refused call named is
// still free for a valid call afterwards. One gateway, SQLite on disk, the sandbox upstreams over loopback.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import { sql } from 'kysely';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M, ok, SSH_KEY } from '../helpers/cloud.js';
import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver } from '../helpers/operation.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'bad-input-shop-key-0123456789';
const SRE = 'bad-input-sre-key-0123456789';
const SCOPES = ['cloud:read', 'cloud:write', 'identity:read', 'identity:write', 'mobile-id:read', 'mobile-id:write'];
/** Every table but those that record a request by design (the quarantine, app activity, the agents' audit). */
const TABLES = [
  'idempotency_records',
  'resources',
  'events',
  'notification_tokens',
  'verification_callbacks',
  'identification_callbacks',
  'provisionings',
  'agent_plans',
  'mobile_id_pending',
] as const;

let gw: TestGateway;
let file: string;
let chain: { projectId: string; networkId: string; subnetId: string; ipId: string; clusterId: string };

/** What could change: rows, metrics an operator reads, upstream calls. */
async function observed(): Promise<Record<string, unknown>> {
  const db = gw.gateway.services.store.db;
  const rows: Record<string, number> = {};
  for (const t of TABLES)
    rows[t] = Number((await sql<{ n: number }>`select count(*) as n from ${sql.table(t)}`.execute(db)).rows[0]!.n);
  const metrics = (await (await request(`${gw.url}/metrics`)).body.text())
    .split('\n')
    .filter((l) => /^gateway_(rate_limit_points_total|app_storage_rows|app_storage_bytes)\{/.test(l));
  const s = gw.gateway.sandbox;
  return {
    rows,
    metrics,
    upstream: {
      cloud: s.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam')).length,
      identification: s.identification!.requests.length,
      verification: s.verification!.requests.length,
    },
  };
}

const IDENTIFY = `mutation($input: CreateIdentificationInput!, $key: UUID) {
  createIdentification(input: $input, idempotencyKey: $key) { identification { id } } }`;
const VERIFY = `mutation($input: RegisterVerificationInput!, $key: UUID) {
  registerVerification(input: $input, idempotencyKey: $key) { verification { externalId } } }`;
const TOKEN = `mutation($ttl: Int) { issueMobileIdNotificationToken(ttlSeconds: $ttl) { token } }`;

/** A composite input valid up to `topics[2]`, whose replication factor exceeds the cluster's 3 instances. */
const badDeepTopic = () => ({
  project: { name: 'deep' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.77.0.0/24' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: [
    { name: 'a', partitions: 1, replicationFactor: 1 },
    { name: 'b', partitions: 1, replicationFactor: 3 },
    { name: 'c', partitions: 1, replicationFactor: 4 },
  ],
});

interface Row {
  surface: string;
  input: string;
  send: (key: string) => Promise<{ code: string | undefined; field?: unknown; raw: string }>;
  code: string;
  field?: string;
  /** A valid call with the same idempotency key, which must not be refused for the earlier one. */
  after?: (key: string) => Promise<void>;
}

const gql = async (query: string, variables: Record<string, unknown>) => {
  const a = await operationOver('post', gw, KEY, { query, variables });
  return {
    code: a.errors?.[0]?.extensions?.code as string | undefined,
    field: a.errors?.[0]?.extensions?.field,
    raw: a.raw,
  };
};

/** registerVerification with `input` as raw JSON text (JSON.stringify cannot write 1e999, nor recurse 5,000 deep). */
const rawGql = async (input: string, key: string) => {
  const body = `{"query":${JSON.stringify(VERIFY)},"variables":{"key":"${key}","input":${input}}}`;
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body,
  });
  const raw = await res.body.text();
  const a = JSON.parse(raw) as { errors?: { extensions?: { code?: string; field?: unknown } }[] };
  return { code: a.errors?.[0]?.extensions?.code, field: a.errors?.[0]?.extensions?.field, raw };
};

const project = async (key: string) => {
  await ok(gw, M.project, { input: { name: `after-${key.slice(0, 8)}` }, key }, KEY);
};

const ROWS: Row[] = [
  {
    surface: 'POST createProject',
    input: 'a malformed idempotency key',
    send: () => gql(M.project, { input: { name: 'p' }, key: 'not-a-uuid' }),
    code: 'BAD_USER_INPUT',
    field: 'key',
  },
  {
    surface: 'POST createNetwork',
    input: 'a wrong type in a nested input',
    send: (key) => gql(M.network, { input: { projectId: chain.projectId, title: 'n', bandwidthMbps: 'fast' }, key }),
    code: 'BAD_USER_INPUT',
    field: 'input.bandwidthMbps',
    after: project,
  },
  {
    surface: 'POST createSubnet',
    input: 'a CIDR with host bits set',
    send: (key) =>
      gql(M.subnet, {
        input: { projectId: chain.projectId, networkId: chain.networkId, title: 's', cidr: '10.1.0.1/24' },
        key,
      }),
    code: 'BAD_USER_INPUT',
    field: 'input.cidr',
    after: project,
  },
  {
    surface: 'POST createKafkaUser',
    input: 'a bad item deep in a list (the third ACL)',
    send: (key) =>
      gql(M.user, {
        input: {
          projectId: chain.projectId,
          clusterId: chain.clusterId,
          name: 'u',
          password: 'Pw-12345678',
          acls: [{}, {}, { pattern: ' ' }],
        },
        key,
      }),
    code: 'BAD_USER_INPUT',
    field: 'input.acls[2].pattern',
    after: project,
  },
  {
    surface: 'POST provisionKafkaCluster',
    input: 'valid first steps, a bad topic third in the list',
    send: (key) => gql(M.provisionKafka, { input: badDeepTopic(), key }),
    code: 'BAD_USER_INPUT',
    field: 'input.topics[2].replicationFactor',
    after: project,
  },
  {
    surface: 'POST provisionVirtualMachine',
    input: 'an instance type its platform lacks',
    send: (key) =>
      gql(M.provisionVm, {
        input: {
          project: { name: 'vm' },
          network: { title: 'net' },
          subnet: { title: 'sub', cidr: '10.78.0.0/24' },
          ipAddress: { title: 'ip' },
          virtualMachine: {
            title: 'vm',
            platform: 'COMPUTE_GPU_V1',
            instanceType: 'C2_MEDIUM',
            bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
            users: [{ name: 'ops', password: 'Vm-pa55word!' }],
          },
        },
        key,
      }),
    code: 'BAD_USER_INPUT',
    field: 'input.virtualMachine.instanceType',
    after: project,
  },
  {
    surface: 'POST createKafkaTopic',
    input: 'a retention beyond a 64-bit whole number (Kafka keeps it as a long)',
    send: (key) =>
      gql(M.topic, {
        input: {
          projectId: chain.projectId,
          clusterId: chain.clusterId,
          name: 'long',
          retentionMs: '9223372036854775808',
        },
        key,
      }),
    code: 'BAD_USER_INPUT',
    field: 'input.retentionMs',
    after: project,
  },
  {
    surface: 'POST provisionKafkaCluster',
    input: 'a topic whose retention has 90,000 digits',
    send: (key) =>
      gql(M.provisionKafka, {
        input: {
          projectId: chain.projectId,
          networkId: chain.networkId,
          subnetId: chain.subnetId,
          cluster: { title: 'k', instanceType: 'C2_MEDIUM', publicIp: '203.0.113.9' },
          topics: [{ name: 'ok' }, { name: 'huge', retentionBytes: '9'.repeat(90_000) }],
        },
        key,
      }),
    code: 'BAD_USER_INPUT',
    field: 'input.topics[1].retentionBytes',
    after: project,
  },
  {
    surface: 'POST createVirtualMachine',
    input: 'two users of one name (one account of the machine)',
    send: (key) =>
      gql(M.vm, {
        input: {
          projectId: chain.projectId,
          title: 'vm',
          instanceType: 'C2_MEDIUM',
          bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
          users: [
            { name: 'ops', sshKeys: [SSH_KEY] },
            { name: 'dev', sshKeys: [SSH_KEY] },
            { name: ' ops', password: 'Vm-pa55word!' },
          ],
          networkInterfaces: [{ networkId: chain.networkId, subnetId: chain.subnetId, ipAddressId: chain.ipId }],
        },
        key,
      }),
    code: 'BAD_USER_INPUT',
    field: 'input.users[2].name',
    after: project,
  },
  {
    surface: 'POST provisionVirtualMachine',
    input: 'two users of one name',
    send: (key) =>
      gql(M.provisionVm, {
        input: {
          projectId: chain.projectId,
          networkId: chain.networkId,
          subnetId: chain.subnetId,
          ipAddressId: chain.ipId,
          virtualMachine: {
            title: 'vm',
            instanceType: 'C2_MEDIUM',
            bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
            users: [{ name: 'ops', password: 'Vm-pa55word!' }, { name: 'ops' }],
          },
        },
        key,
      }),
    code: 'BAD_USER_INPUT',
    field: 'input.virtualMachine.users[1].name',
    after: project,
  },
  {
    surface: 'POST createIdentification',
    input: 'a control character inside the workflow id',
    send: (key) => gql(IDENTIFY, { input: { workflowId: 'wf\u0001new', applicantExternalId: 'a-1' }, key }),
    code: 'BAD_USER_INPUT',
    field: 'input.workflowId',
    after: project,
  },
  {
    surface: 'POST registerVerification',
    input: 'a line break inside the external id',
    send: (key) => gql(VERIFY, { input: { workflowId: 'wf', applicant: {}, externalId: 'v-1\nv-2' }, key }),
    code: 'BAD_USER_INPUT',
    field: 'input.externalId',
    after: project,
  },
  {
    surface: 'POST createIdentification',
    input: 'a link lifetime out of range',
    send: (key) => gql(IDENTIFY, { input: { workflowId: 'wf-new', linkLifetimeInMinutes: 196 }, key }),
    code: 'BAD_USER_INPUT',
    field: 'input.linkLifetimeInMinutes',
    after: project,
  },
  {
    surface: 'POST createIdentification',
    input: 'an oversized redirect URL',
    send: (key) =>
      gql(IDENTIFY, { input: { workflowId: 'wf-new', redirectUrl: `https://x.test/${'a'.repeat(3000)}` }, key }),
    code: 'BAD_USER_INPUT',
    field: 'input.redirectUrl',
  },
  {
    surface: 'POST registerVerification',
    input: 'an applicant that is no object',
    send: (key) => gql(VERIFY, { input: { workflowId: 'wf', applicant: [1, 2] }, key }),
    code: 'BAD_USER_INPUT',
    field: 'input.applicant',
    after: project,
  },
  {
    surface: 'POST issueMobileIdNotificationToken',
    input: 'a lifetime below its range',
    send: () => gql(TOKEN, { ttl: 5 }),
    code: 'BAD_USER_INPUT',
    field: 'ttlSeconds',
  },
  {
    surface: 'POST createProject',
    input: 'a lone surrogate in a name (no UTF-8 for it: sent and stored as U+FFFD)',
    send: (key) => gql(M.project, { input: { name: 'shop-\ud800' }, key }),
    code: 'BAD_USER_INPUT',
    field: 'input.name',
    after: project,
  },
  {
    surface: 'POST registerVerification',
    input: 'a number JSON cannot hold in the applicant (1e999, sent as null)',
    send: (key) => rawGql('{"workflowId":"wf","applicant":{"n":1e999}}', key),
    code: 'BAD_USER_INPUT',
    field: 'input.applicant.n',
    after: project,
  },
  {
    surface: 'POST registerVerification',
    input: 'a number JSON cannot hold written in the document (applicant: { n: 1e400 })',
    send: (key) =>
      gql(
        `mutation($key: UUID) { registerVerification(input: { workflowId: "wf", applicant: { n: 1e400 } },
          idempotencyKey: $key) { verification { externalId } } }`,
        { key },
      ),
    code: 'GRAPHQL_VALIDATION_FAILED',
    after: project,
  },
  {
    surface: 'graphql-ws checkRfm',
    input: 'a number JSON cannot hold written in the document (input: { n: -1e400 })',
    send: async (key) => {
      const query = `mutation($key: UUID) { checkRfm(input: { name: "Ann", n: [1, -1e400] }, idempotencyKey: $key) { __typename } }`;
      const a = await operationOver('ws', gw, KEY, { query, variables: { key } });
      return { code: a.errors?.[0]?.extensions?.code as string | undefined, raw: a.raw };
    },
    code: 'GRAPHQL_VALIDATION_FAILED',
    after: project,
  },
  {
    surface: 'POST checkRfm',
    input: 'an input written in the document nested deeper than 64 levels',
    send: (key) =>
      gql(
        `mutation($key: UUID) { checkRfm(input: ${'{ x: '.repeat(70)}1${' }'.repeat(70)}, idempotencyKey: $key) { __typename } }`,
        { key },
      ),
    code: 'GRAPHQL_VALIDATION_FAILED',
    after: project,
  },
  {
    surface: 'POST registerVerification',
    input: 'an applicant nested 5,000 levels deep (30 KB)',
    send: (key) => rawGql(`{"workflowId":"wf","applicant":${'{"x":'.repeat(5000)}1${'}'.repeat(5000)}}`, key),
    code: 'BAD_USER_INPUT',
    after: project,
  },
  {
    surface: 'graphql-ws registerVerification',
    input: 'a lone surrogate in a name of the applicant',
    send: async (key) => {
      const variables = { input: { workflowId: 'wf', applicant: { 'x\udc00': 'a' } }, key };
      const a = await operationOver('ws', gw, KEY, { query: VERIFY, variables });
      const e = a.errors?.[0]?.extensions;
      return { code: e?.code as string | undefined, field: e?.field, raw: a.raw };
    },
    code: 'BAD_USER_INPUT',
    field: 'input.applicant.x\udc00',
    after: project,
  },
  {
    surface: 'graphql-ws createProject',
    input: 'a malformed idempotency key',
    send: async () => {
      const a = await operationOver('ws', gw, KEY, { query: M.project, variables: { input: { name: 'p' }, key: 'x' } });
      return { code: a.errors?.[0]?.extensions?.code as string | undefined, raw: a.raw };
    },
    code: 'BAD_USER_INPUT',
  },
  {
    surface: 'SSE createNetwork',
    input: 'a negative bandwidth',
    send: async (key) => {
      const input = { projectId: chain.projectId, title: 'n', bandwidthMbps: -1 };
      const a = await operationOver('sse', gw, KEY, { query: M.network, variables: { input, key } });
      return {
        code: a.errors?.[0]?.extensions?.code as string | undefined,
        field: a.errors?.[0]?.extensions?.field,
        raw: a.raw,
      };
    },
    code: 'BAD_USER_INPUT',
    field: 'input.bandwidthMbps',
    after: project,
  },
];

/** Webhooks: an answer's status and `error`. */
async function post(path: string, body: string, contentType: string, auth?: string) {
  const res = await request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': contentType, ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
    body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, error: text ? (JSON.parse(text) as { error?: string }).error : undefined };
}

describe('bad input changes nothing', () => {
  beforeAll(async () => {
    file = appsFile('bad-input-', [
      { name: 'shop', scopes: SCOPES, key: KEY },
      { name: 'sre', scopes: ['operator'], key: SRE },
    ]);
    gw = await startTestGateway({
      GATEWAY_APPS_FILE: file,
      RATE_LIMIT_CREATIONS: '1000/1h',
      RATE_LIMIT_READS: '1000/1h',
    });
    const projectId = (await ok(gw, M.project, { input: { name: 'base' } }, KEY)).project.id;
    const networkId = (await ok(gw, M.network, { input: { projectId, title: 'net' } }, KEY)).network.id;
    const subnet = { projectId, networkId, title: 'sub', cidr: '10.9.0.0/24' };
    const subnetId = (await ok(gw, M.subnet, { input: subnet }, KEY)).subnet.id;
    const ipId = (await ok(gw, M.ip, { input: { projectId, networkId, title: 'ip' } }, KEY)).ipAddress.id;
    const cluster = { projectId, title: 'k', instanceType: 'C2_MEDIUM', subnetId, publicIp: '203.0.113.9' };
    const clusterId = (await ok(gw, M.cluster, { input: cluster }, KEY)).kafkaCluster.id;
    chain = { projectId, networkId, subnetId, ipId, clusterId };
  });
  afterAll(() => gw.close());

  it.each(ROWS)('$surface, $input: $code, nothing changed', async (row) => {
    const key = randomUUID();
    const before = await observed();
    const answer = await row.send(key);
    await gw.gateway.services.provisioning.idle();
    expect(answer.code, answer.raw).toBe(row.code);
    if (row.field) expect(answer.field, answer.raw).toBe(row.field);
    // An operation refused in its resolver has spent its point, as documented (docs/apps-and-security.md: spent
    // before anything runs); a composite provisioning charges itself only once its input is checked, and variables the
    // run refuses spend nothing: those are compared whole.
    const resolver = answer.raw.includes('"path":[') && !row.surface.includes('provision');
    const comparable = (o: Record<string, unknown>) =>
      resolver ? { ...o, metrics: (o.metrics as string[]).filter((l) => !l.includes('outcome="allowed"')) } : o;
    expect(comparable(await observed())).toEqual(comparable(before));
    // The key was not burnt: a valid call with it runs (neither IDEMPOTENCY_KEY_REUSED nor a replayed error).
    if (row.after) await row.after(key);
  });

  it.each([
    ['mobile-id: malformed JSON', '/webhooks/mobile-id', '{"auth_req_id":', 'application/json', 400, 'invalid_request'],
    ['mobile-id: an unsupported media type', '/webhooks/mobile-id', 'x', 'text/plain', 415, 'invalid_request'],
    [
      'verification: an address never issued',
      `/webhooks/verification/${'a'.repeat(43)}`,
      '{}',
      'application/json',
      404,
      'not_found',
    ],
    [
      'identification: an address never issued',
      `/webhooks/identification/${'b'.repeat(43)}`,
      '{}',
      'application/json',
      404,
      'not_found',
    ],
  ] as const)('webhook %s: %i %s, no event stored', async (_name, path, body, type, status, error) => {
    const token = (await ok(gw, TOKEN, { ttl: 600 }, KEY)).token as string;
    const before = await observed();
    expect(await post(path, body, type, token)).toEqual({ status, error });
    expect(await observed()).toEqual(before);
  });

  it('a body shorter than its Content-Length, then the connection closed: nothing changed, no error logged', async () => {
    const token = (await ok(gw, TOKEN, { ttl: 600 }, KEY)).token as string;
    const before = await observed();
    const errorsBefore = gw
      .logs()
      .split('\n')
      .filter((l) => l.includes('"level":50')).length;
    const { port, hostname } = new URL(gw.url);
    const heads = [
      `POST /webhooks/mobile-id HTTP/1.1\r\nAuthorization: Bearer ${token}\r\n`,
      `POST /webhooks/verification/${'a'.repeat(43)} HTTP/1.1\r\n`,
      `POST /graphql HTTP/1.1\r\nAuthorization: Bearer ${KEY}\r\n`,
      `POST /graphql/stream HTTP/1.1\r\nAuthorization: Bearer ${KEY}\r\nAccept: text/event-stream\r\n`,
    ];
    // Each request carries its id, to know when the gateway has it and when it is done with it.
    const ids = heads.map(() => randomUUID());
    const arrived = new Set<unknown>();
    const onRequest = (req: { headers: Record<string, unknown> }) => arrived.add(req.headers['x-request-id']);
    gw.gateway.server.on('request', onRequest);
    try {
      for (const [i, head] of heads.entries()) {
        const socket = net.connect(Number(port), hostname);
        socket.on('error', () => {});
        socket.write(
          `${head}X-Request-Id: ${ids[i]}\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`,
        );
        // The connection is closed once the gateway has the request and waits for the rest of its body.
        await waitFor(() => arrived.has(ids[i]), 20_000, `request ${i} at the gateway`);
        socket.destroy();
      }
    } finally {
      gw.gateway.server.off('request', onRequest);
    }
    // The gateway is done with each request once it has written its last line for it: the close noticed, the answer
    // sent, or the failure logged. What a request changes, it changes before that.
    const ended = (id: string) =>
      gw
        .logs()
        .split('\n')
        .some(
          (l) =>
            l.includes(`"requestId":"${id}"`) &&
            (l.includes('"level":50') || /"msg":"(request|the client closed the connection mid-request)"/.test(l)),
        );
    for (const id of ids) await waitFor(() => ended(id), 20_000, `the gateway's end of request ${id}`);
    expect(await observed()).toEqual(before);
    const errors = gw
      .logs()
      .split('\n')
      .filter((l) => l.includes('"level":50'));
    expect(errors.slice(errorsBefore)).toEqual([]);
    await ok(gw, M.project, { input: { name: 'after-abort' } }, KEY);
  });

  it('POST /admin/reload with a bad apps file: 422, the running apps kept', async () => {
    const good = fs.readFileSync(file, 'utf8');
    fs.writeFileSync(file, 'apps:\n  - name: shop\n    scopes: [cloud:read]\n    keys: [{ sha256: nothex }]\n');
    try {
      const res = await request(`${gw.url}/admin/reload`, {
        method: 'POST',
        headers: { authorization: `Bearer ${SRE}` },
      });
      expect(res.statusCode).toBe(422);
      expect(((await res.body.json()) as { error: string }).error).toBe('reload_failed');
      await ok(gw, M.project, { input: { name: 'after-reload' } }, KEY);
    } finally {
      fs.writeFileSync(file, good);
    }
  });
});
