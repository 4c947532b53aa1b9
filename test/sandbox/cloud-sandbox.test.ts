import { randomUUID } from 'node:crypto';
import { Agent, request } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

import { CLOUD_SHAPE_MODES } from '../../src/sandbox/cloud-shapes.js';
import {
  SANDBOX_SERVICE_ACCOUNT_TOKEN,
  startCloudSandbox,
  type CloudSandbox,
  type CloudSandboxOptions,
} from '../../src/sandbox/cloud.js';

const TOKEN = SANDBOX_SERVICE_ACCOUNT_TOKEN;
const UBUNTU = 'cd354813-aff7-423b-9d16-6820bce249f9';
const SSH_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG5hbmRib3hrZXlmb3J0ZXN0aW5nb25seQ sandbox@test';

const agent = new Agent({ keepAliveTimeout: 10_000 });
// destroy, not close: a failed test may leave a request in flight.
afterAll(() => agent.destroy());

const started: CloudSandbox[] = [];
async function sandbox(options?: CloudSandboxOptions): Promise<CloudSandbox> {
  const s = await startCloudSandbox(options);
  started.push(s);
  return s;
}
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

async function post(
  base: CloudSandbox,
  path: string,
  body: unknown,
  options: { headers?: Record<string, string | undefined>; signal?: AbortSignal } = {},
): Promise<Reply> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${TOKEN}`,
    'content-type': 'application/json',
    accept: 'application/json',
    'idempotency-key': randomUUID(),
  };
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (value === undefined) delete headers[name];
    else headers[name] = value;
  }
  const res = await request(`${base.url}${path}`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    dispatcher: agent,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) };
}

const SERVICES = '/ocs/v1/services';
const PROJECTS = '/apis/projects/public/v4/projects';
const TOKENS = '/iam/v2/tokens';

function envelope(
  kind: string,
  productCode: string,
  projectId: string,
  spec: Record<string, unknown>,
  parentId?: string,
): Record<string, unknown> {
  return {
    platform: { productCode, regionCode: 'msk' },
    kind,
    metadata: { title: `a ${kind}`, description: 'created by a test' },
    projectId,
    ...(parentId === undefined ? {} : { parentBinding: { targetId: parentId } }),
    spec,
    zoneCode: 'msk-avntg',
  };
}

const networkSpec = { 'vendor.extensions.network': { bandwidth_mbps: 100, default_gfw_rule_action: 'allow' } };

function kafkaSpec(networkId: string, subnetId: string): Record<string, unknown> {
  return {
    'vendor.extensions.kafka': {
      instance_count: 3,
      instance_cpu_utilization: 'medium',
      instance_disk_size: 50,
      instance_disk_type: 'ssd.fast',
      instance_type: 'c2.medium',
      kafka_version: '3.1.0',
      network_id: networkId,
      subnetwork_id: subnetId,
      subnetwork_cidr: '10.0.1.0/24',
      white_host: '203.0.113.10',
    },
  };
}

function topicSpec(name = 'events'): Record<string, unknown> {
  return {
    'vendor.extensions.topic': {
      name,
      num_partitions: 3,
      replication_factor: 3,
      compression_type: 'producer',
      max_message_bytes: 1048588,
      min_insync_replicas: 2,
      cleanup_policy: 'delete',
      min_compaction_lag_ms: '0',
      max_compaction_lag_ms: '9223372036854775807',
      delete_retention_ms: '86400000',
      retention_bytes: '-1',
      retention_ms: '604800000',
    },
  };
}

const userSpec = {
  'vendor.extensions.user': {
    name: 'app',
    password: 'correct horse battery staple',
    acls: [{ pattern: '*', pattern_type: 'literal', operation: 'rw' }],
    groups_acls: [{ pattern: '*', pattern_type: 'literal' }],
  },
};

function vmSpec(networkId: string, subnetId: string, ipId: string): Record<string, unknown> {
  return {
    instance: { instanceType: 'c2.medium', platformId: 'compute.v3' },
    bootDisk: { sizeGb: 20, diskType: 'ssd.fast', sourceImageId: UBUNTU },
    secondaryDisks: [],
    users: [{ name: 'admin', password: '', sshKeys: [SSH_KEY] }],
    networkInterfaces: [{ networkId, subnetworkId: subnetId, natIpId: ipId }],
    'vendor.extensions.promo': { is_promo: false },
  };
}

async function createOk(s: CloudSandbox, path: string, body: unknown): Promise<string> {
  const res = await post(s, path, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
}

/** A project with a network, a subnet (10.0.1.0/24) and an IP address. */
async function networkFixture(s: CloudSandbox) {
  const projectId = await createOk(s, PROJECTS, { name: 'demo', description: '' });
  const networkId = await createOk(s, SERVICES, envelope('network', 'network', projectId, networkSpec));
  const subnetId = await createOk(
    s,
    SERVICES,
    envelope('subnet', 'network', projectId, { 'vendor.extensions.subnet': { cidr: '10.0.1.0/24' } }, networkId),
  );
  const ipId = await createOk(s, SERVICES, envelope('ip', 'network', projectId, {}, networkId));
  return { projectId, networkId, subnetId, ipId };
}

function expectError(res: Reply, status: number, code: string, detailsMention?: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body).toEqual({ code, domain: expect.any(String), details: expect.any(String) });
  if (detailsMention !== undefined) expect(res.body.details).toContain(detailsMention);
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('tokens', () => {
  it('issues a JWT-shaped bearer token with the configured lifetime', async () => {
    const s = await sandbox({ tokenTtlSeconds: 120 });
    const res = await post(s, TOKENS, { login: 'user', password: 'secret' }, { headers: { authorization: undefined } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 120 });
    const [header] = (res.body.access_token as string).split('.');
    expect(res.body.access_token.split('.')).toHaveLength(3);
    expect(JSON.parse(Buffer.from(header!, 'base64url').toString())).toMatchObject({ alg: 'HS256', typ: 'JWT' });

    const project = await post(
      s,
      PROJECTS,
      { name: 'p', description: '' },
      {
        headers: { authorization: `Bearer ${res.body.access_token}` },
      },
    );
    expect(project.status).toBe(201);
  });

  it('refuses credentials other than the accepted ones, and empty credentials', async () => {
    const s = await sandbox({ acceptedCredentials: { login: 'svc', password: 'right' } });
    expectError(await post(s, TOKENS, { login: 'svc', password: 'wrong' }), 401, 'INVALID_CREDENTIALS');
    expectError(await post(s, TOKENS, {}), 401, 'INVALID_CREDENTIALS');
    // Key order does not matter: the comparison is a deep equality.
    expect((await post(s, TOKENS, { password: 'right', login: 'svc' })).status).toBe(200);
    expect(s.issuedTokens).toHaveLength(1);
  });

  it('answers 401 without a token, with an unknown token and with an expired one', async () => {
    const s = await sandbox();
    const body = { name: 'p', description: '' };
    expectError(await post(s, PROJECTS, body, { headers: { authorization: undefined } }), 401, 'UNAUTHENTICATED');
    expectError(await post(s, PROJECTS, body, { headers: { authorization: 'Bearer forged' } }), 401, 'UNAUTHENTICATED');

    const token = (await post(s, TOKENS, { login: 'a' })).body.access_token as string;
    const auth = { authorization: `Bearer ${token}` };
    expect((await post(s, PROJECTS, body, { headers: auth })).status).toBe(201);
    s.expireAllTokens();
    const expired = await post(s, PROJECTS, body, { headers: auth });
    expectError(expired, 401, 'TOKEN_EXPIRED');
    expect(expired.headers['www-authenticate']).toContain('Bearer');

    // A fresh token works again (what a client's refresh-once-on-401 relies on).
    const fresh = (await post(s, TOKENS, { login: 'a' })).body.access_token as string;
    expect((await post(s, PROJECTS, body, { headers: { authorization: `Bearer ${fresh}` } })).status).toBe(201);
  });

  it('lets a token lapse after its lifetime', async () => {
    let now = Date.now();
    const s = await sandbox({ tokenTtlSeconds: 0.2, now: () => now });
    const token = (await post(s, TOKENS, { login: 'a' })).body.access_token as string;
    now += 100;
    const body = { name: 'p', description: '' };
    expect((await post(s, PROJECTS, body, { headers: { authorization: `Bearer ${token}` } })).status).toBe(201);
    now += 200;
    const res = await post(
      s,
      PROJECTS,
      { name: 'p', description: '' },
      { headers: { authorization: `Bearer ${token}` } },
    );
    expectError(res, 401, 'TOKEN_EXPIRED');
  });

  it('accepts only the configured service-account tokens', async () => {
    const s = await sandbox({ serviceAccountTokens: ['sa-1'] });
    const body = { name: 'p', description: '' };
    expect((await post(s, PROJECTS, body, { headers: { authorization: 'Bearer sa-1' } })).status).toBe(201);
    expectError(await post(s, PROJECTS, body), 401, 'UNAUTHENTICATED');
  });
});

describe('creation', () => {
  it('creates a project with a UUID v4 id', async () => {
    const s = await sandbox();
    const res = await post(s, PROJECTS, { name: 'demo', description: 'a project' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: 'demo', description: 'a project', createdAt: expect.any(String) });
    expect(res.body.id).toMatch(UUID_V4);
    expect(s.projects().map((p) => p.id)).toEqual([res.body.id]);
  });

  it('refuses a project without a name or with an unknown field', async () => {
    const s = await sandbox();
    expectError(await post(s, PROJECTS, { name: '', description: '' }), 400, 'VALIDATION_FAILED', 'name');
    expectError(await post(s, PROJECTS, { title: 'x', name: 'x', description: '' }), 400, 'VALIDATION_FAILED', 'title');
    expect(s.projects()).toHaveLength(0);
  });

  it('accepts a valid request of each of the seven kinds', async () => {
    const s = await sandbox();
    const { projectId, networkId, subnetId, ipId } = await networkFixture(s);
    const clusterId = await createOk(
      s,
      SERVICES,
      envelope('compute', 'vendor-kafka', projectId, kafkaSpec(networkId, subnetId)),
    );
    await createOk(s, SERVICES, envelope('topic', 'vendor-kafka', projectId, topicSpec(), clusterId));
    await createOk(s, SERVICES, envelope('user', 'vendor-kafka', projectId, userSpec, clusterId));
    const vm = await post(
      s,
      SERVICES,
      envelope('compute', 'compute-cloud', projectId, vmSpec(networkId, subnetId, ipId)),
    );
    expect(vm.status).toBe(201);
    expect(vm.body).toMatchObject({ kind: 'compute', projectId, status: 'CREATING', metadata: { title: 'a compute' } });
    expect(vm.body.id).toMatch(UUID_V4);

    expect(s.resources().map((r) => r.type)).toEqual([
      'network',
      'subnet',
      'ip',
      'kafka-cluster',
      'kafka-topic',
      'kafka-user',
      'virtual-machine',
    ]);
    expect(s.resources('ip')[0]?.address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // Passwords are not kept in the sandbox's resource store.
    expect(JSON.stringify(s.resources())).not.toContain('correct horse');
  });

  it('refuses a nested vendor object where the spec has a literal dotted key', async () => {
    const s = await sandbox();
    const { projectId } = await networkFixture(s);
    const nested = { vendor: { extensions: { network: networkSpec['vendor.extensions.network'] } } };
    const res = await post(s, SERVICES, envelope('network', 'network', projectId, nested));
    expectError(res, 400, 'VALIDATION_FAILED', '"vendor.extensions.network"');
    expect(s.resources('network')).toHaveLength(1);
  });

  it('refuses dotted envelope paths sent as literal keys instead of nested objects', async () => {
    const s = await sandbox();
    const { projectId } = await networkFixture(s);
    const { platform: _platform, ...rest } = envelope('network', 'network', projectId, networkSpec);
    const res = await post(s, SERVICES, { ...rest, 'platform.productCode': 'network', 'platform.regionCode': 'msk' });
    expectError(res, 400, 'VALIDATION_FAILED', 'platform');
  });

  it('refuses a number where the spec says a decimal string, naming the field', async () => {
    const s = await sandbox();
    const { projectId, networkId, subnetId } = await networkFixture(s);
    const clusterId = await createOk(
      s,
      SERVICES,
      envelope('compute', 'vendor-kafka', projectId, kafkaSpec(networkId, subnetId)),
    );
    const spec = topicSpec();
    (spec['vendor.extensions.topic'] as Record<string, unknown>).retention_ms = 604800000;
    const res = await post(s, SERVICES, envelope('topic', 'vendor-kafka', projectId, spec, clusterId));
    expectError(res, 400, 'VALIDATION_FAILED', 'spec["vendor.extensions.topic"].retention_ms');
  });

  it('refuses a white_host that is not a public IPv4 address (spec: Kafka cluster, white_host)', async () => {
    const s = await sandbox();
    const { projectId, networkId, subnetId } = await networkFixture(s);
    for (const address of ['10.0.1.7', '192.168.0.1', '127.0.0.1', '100.64.0.1', '224.0.0.1']) {
      const spec = kafkaSpec(networkId, subnetId);
      (spec['vendor.extensions.kafka'] as Record<string, unknown>).white_host = address;
      const res = await post(s, SERVICES, envelope('compute', 'vendor-kafka', projectId, spec));
      expectError(res, 400, 'VALIDATION_FAILED', 'spec["vendor.extensions.kafka"].white_host');
    }
    expect(s.resources('kafka-cluster')).toHaveLength(0);
  });

  it('refuses an unknown kind and a kind paired with the wrong product code', async () => {
    const s = await sandbox();
    const { projectId } = await networkFixture(s);
    expectError(await post(s, SERVICES, envelope('bucket', 'network', projectId, {})), 400, 'UNKNOWN_KIND', 'kind');
    expectError(
      await post(s, SERVICES, envelope('network', 'vendor-kafka', projectId, networkSpec)),
      400,
      'PRODUCT_CODE_MISMATCH',
      'platform.productCode',
    );
  });

  it('requires parentBinding exactly for subnet, ip, topic and user, naming an existing parent', async () => {
    const s = await sandbox();
    const { projectId, networkId } = await networkFixture(s);
    expectError(
      await post(s, SERVICES, envelope('network', 'network', projectId, networkSpec, networkId)),
      400,
      'VALIDATION_FAILED',
      'parentBinding',
    );
    expectError(
      await post(s, SERVICES, envelope('ip', 'network', projectId, {})),
      400,
      'VALIDATION_FAILED',
      'parentBinding',
    );
    expectError(
      await post(s, SERVICES, envelope('ip', 'network', projectId, {}, randomUUID())),
      404,
      'RESOURCE_NOT_FOUND',
      'parentBinding.targetId',
    );
    // A network is not a Kafka cluster.
    expectError(
      await post(s, SERVICES, envelope('topic', 'vendor-kafka', projectId, topicSpec(), networkId)),
      400,
      'INVALID_REFERENCE',
      'parentBinding.targetId',
    );
  });

  it('refuses a resource in a project it did not create', async () => {
    const s = await sandbox();
    expectError(
      await post(s, SERVICES, envelope('network', 'network', randomUUID(), networkSpec)),
      404,
      'PROJECT_NOT_FOUND',
      'projectId',
    );
  });

  it('refuses a VM whose instance type is not one of its platform', async () => {
    const s = await sandbox();
    const { projectId, networkId, subnetId, ipId } = await networkFixture(s);
    const spec = vmSpec(networkId, subnetId, ipId);
    spec.instance = { instanceType: 'c2.medium', platformId: 'compute.gpu.v1' };
    expectError(
      await post(s, SERVICES, envelope('compute', 'compute-cloud', projectId, spec)),
      400,
      'VALIDATION_FAILED',
      'spec.instance.instanceType',
    );
  });

  it('checks the headers of creation calls', async () => {
    const s = await sandbox();
    const { projectId, networkId, subnetId } = await networkFixture(s);
    const body = { name: 'p', description: '' };
    expectError(
      await post(s, PROJECTS, body, { headers: { 'idempotency-key': undefined } }),
      400,
      'IDEMPOTENCY_KEY_MISSING',
    );
    expectError(
      await post(s, PROJECTS, body, { headers: { 'idempotency-key': 'not-a-uuid' } }),
      400,
      'IDEMPOTENCY_KEY_INVALID',
    );
    expectError(
      await post(s, PROJECTS, body, { headers: { 'content-type': 'text/plain' } }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expectError(await post(s, PROJECTS, '{"name":', {}), 400, 'MALFORMED_JSON');
    const cluster = envelope('compute', 'vendor-kafka', projectId, kafkaSpec(networkId, subnetId));
    expectError(await post(s, SERVICES, cluster, { headers: { accept: undefined } }), 406, 'NOT_ACCEPTABLE');
    expectError(await post(s, SERVICES, cluster, { headers: { accept: '*/*' } }), 406, 'NOT_ACCEPTABLE');
    // Network creation is shown without Accept, so it does not need it.
    expect(
      (
        await post(s, SERVICES, envelope('network', 'network', projectId, networkSpec), {
          headers: { accept: undefined },
        })
      ).status,
    ).toBe(201);
    expect(s.resources('kafka-cluster')).toHaveLength(0);
  });
});

describe('idempotency', () => {
  it('replays the same answer for the same key and body, creating nothing new', async () => {
    const s = await sandbox();
    const key = randomUUID();
    const first = await post(s, PROJECTS, { name: 'demo', description: 'x' }, { headers: { 'idempotency-key': key } });
    // Same content, keys in another order: canonical JSON is equal.
    const again = await post(s, PROJECTS, { description: 'x', name: 'demo' }, { headers: { 'idempotency-key': key } });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(s.projects()).toHaveLength(1);
    expect(s.requests.map((r) => r.replayed)).toEqual([false, true]);
  });

  it('refuses a key reused with another body', async () => {
    const s = await sandbox();
    const key = randomUUID();
    expect(
      (await post(s, PROJECTS, { name: 'a', description: '' }, { headers: { 'idempotency-key': key } })).status,
    ).toBe(201);
    const reuse = await post(s, PROJECTS, { name: 'b', description: '' }, { headers: { 'idempotency-key': key } });
    expectError(reuse, 409, 'IDEMPOTENCY_KEY_CONFLICT', 'Idempotency-Key');
    expect(s.projects()).toHaveLength(1);
  });

  it('keeps a refused request from using up its key', async () => {
    const s = await sandbox();
    const key = randomUUID();
    expect(
      (await post(s, PROJECTS, { name: '', description: '' }, { headers: { 'idempotency-key': key } })).status,
    ).toBe(400);
    expect(
      (await post(s, PROJECTS, { name: 'ok', description: '' }, { headers: { 'idempotency-key': key } })).status,
    ).toBe(201);
  });
});

describe('faults', () => {
  it('answers scripted 503s with Retry-After and an error body, then recovers', async () => {
    const s = await sandbox();
    s.faults.enqueue('503', '503');
    const body = { name: 'p', description: '' };
    const key = randomUUID();
    for (let i = 0; i < 2; i++) {
      const res = await post(s, PROJECTS, body, { headers: { 'idempotency-key': key } });
      expectError(res, 503, 'SERVICE_UNAVAILABLE');
      expect(res.headers['retry-after']).toBe('1');
    }
    expect(s.projects()).toHaveLength(0);
    expect((await post(s, PROJECTS, body, { headers: { 'idempotency-key': key } })).status).toBe(201);
    expect(s.requests.map((r) => [r.status, r.fault ?? null])).toEqual([
      [503, '503'],
      [503, '503'],
      [201, null],
    ]);
  });

  it('answers a scripted 429 with Retry-After in seconds', async () => {
    const s = await sandbox();
    s.faults.enqueue({ status: 429, retryAfterSeconds: 1 });
    const res = await post(s, PROJECTS, { name: 'p', description: '' });
    expectError(res, 429, 'TOO_MANY_REQUESTS');
    expect(res.headers['retry-after']).toBe('1');
  });

  it('answers a scripted status with a scripted body, only on the matching path', async () => {
    const s = await sandbox();
    const refusal = { code: 'INSUFFICIENT_BALANCE', domain: 'billing', details: 'balance too low' };
    s.faults.enqueueFor(SERVICES, { status: 402, body: refusal });
    const projectId = await createOk(s, PROJECTS, { name: 'p', description: '' });
    expect(s.faults.pending).toBe(1);
    const refused = await post(s, SERVICES, envelope('network', 'network', projectId, networkSpec));
    expect(refused.status).toBe(402);
    expect(refused.body).toEqual(refusal);
    expect(refused.headers['retry-after']).toBeUndefined();
    expect(s.faults.pending).toBe(0);
    expect(s.resources()).toHaveLength(0);
    expect((await post(s, SERVICES, envelope('network', 'network', projectId, networkSpec))).status).toBe(201);
    expect(s.requests[1]).toMatchObject({ path: SERVICES, status: 402, fault: 'status:402' });
  });

  it('resets the connection: the client sees a socket error and nothing is created', async () => {
    const s = await sandbox();
    s.faults.enqueue('reset');
    await expect(post(s, PROJECTS, { name: 'p', description: '' })).rejects.toThrow(/socket|closed|reset/i);
    expect(s.projects()).toHaveLength(0);
    expect(s.requests[0]).toMatchObject({ status: null, fault: 'reset' });
  });

  it('resets after the work is done: the retry with the same key replays the created resource', async () => {
    const s = await sandbox();
    s.faults.enqueue('reset-after');
    const key = randomUUID();
    const body = { name: 'p', description: '' };
    await expect(post(s, PROJECTS, body, { headers: { 'idempotency-key': key } })).rejects.toThrow();
    expect(s.projects()).toHaveLength(1);
    const retry = await post(s, PROJECTS, body, { headers: { 'idempotency-key': key } });
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(s.projects()[0]!.id);
    expect(s.projects()).toHaveLength(1);
  });

  it('hangs on a timeout fault until the client gives up', async () => {
    const s = await sandbox();
    s.faults.enqueue('timeout');
    const startedAt = Date.now();
    await expect(
      post(s, PROJECTS, { name: 'p', description: '' }, { signal: AbortSignal.timeout(500) }),
    ).rejects.toThrow(/abort|timeout/i);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(450);
    expect(s.requests[0]).toMatchObject({ status: null, fault: 'timeout' });
    expect(s.projects()).toHaveLength(0);
  });

  it('adds the configured latency to every request', async () => {
    const s = await sandbox({ latencyMs: 150 });
    const startedAt = Date.now();
    expect((await post(s, PROJECTS, { name: 'p', description: '' })).status).toBe(201);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(140);
  });

  it('fails every request at random rate 1.0, and none at 0', async () => {
    const s = await sandbox({ faultRate: 1, faultSeed: 42, hangMs: 2_000 });
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) {
      try {
        const res = await post(s, PROJECTS, { name: `p${i}`, description: '' }, { signal: AbortSignal.timeout(300) });
        outcomes.push(String(res.status));
      } catch {
        outcomes.push('error');
      }
    }
    expect(outcomes.every((o) => o === 'error' || ['429', '500', '503'].includes(o))).toBe(true);
    expect(s.faults.injected).toHaveLength(20);
    // Only 'reset-after' lets work through; it never answers, so nothing was acknowledged.
    const resetAfter = s.faults.injected.filter((f) => f.fault === 'reset-after').length;
    expect(s.projects()).toHaveLength(resetAfter);

    s.faults.rate = 0;
    expect((await post(s, PROJECTS, { name: 'ok', description: '' })).status).toBe(201);
  });

  it('picks the same random faults for the same seed', async () => {
    const kinds = async () => {
      const s = await sandbox({ faultRate: 0.5, faultSeed: 7, randomFaultKinds: ['500', '503', '429'] });
      for (let i = 0; i < 12; i++) await post(s, PROJECTS, { name: `p${i}`, description: '' });
      return s.requests.map((r) => r.status);
    };
    const first = await kinds();
    expect(first).toEqual(await kinds());
    expect(new Set(first).size).toBeGreaterThan(1);
  });

  it('closes promptly while a request hangs and keep-alive sockets are open', async () => {
    const s = await sandbox();
    expect((await post(s, PROJECTS, { name: 'p', description: '' })).status).toBe(201);
    s.faults.enqueue('timeout');
    const hanging = post(s, PROJECTS, { name: 'q', description: '' }).catch((e: unknown) => e);
    // The request is being held (its 'timeout' fault keeps the socket for 10 minutes): close must not wait
    // for it, so close resolving at all (well within the test's timeout) is the behaviour; no duration is asserted.
    await expect.poll(() => s.faults.injected.length, { timeout: 20_000 }).toBe(1);
    await s.close();
    expect(await hanging).toBeInstanceOf(Error);
  });
});

describe('fast mode', () => {
  it('skips body validation but still authenticates and replays', async () => {
    const s = await sandbox({ fast: true });
    const key = randomUUID();
    const odd = envelope('compute', 'vendor-kafka', randomUUID(), { whatever: true });
    const first = await post(s, SERVICES, odd, { headers: { 'idempotency-key': key } });
    expect(first.status).toBe(201);
    const again = await post(s, SERVICES, odd, { headers: { 'idempotency-key': key } });
    expect(again.body.id).toBe(first.body.id);
    expect(s.resources()).toHaveLength(1);
    expectError(await post(s, SERVICES, odd, { headers: { authorization: undefined } }), 401, 'UNAUTHENTICATED');
  });
});

describe('recording', () => {
  it('records every request with lower-cased headers, the parsed body and the status', async () => {
    const s = await sandbox();
    await post(s, PROJECTS, { name: 'p', description: '' }, { headers: { 'X-Trace': 'abc' } });
    expect(s.requests).toHaveLength(1);
    expect(s.requests[0]).toMatchObject({
      method: 'POST',
      path: PROJECTS,
      body: { name: 'p', description: '' },
      status: 201,
      headers: expect.objectContaining({ 'x-trace': 'abc', 'content-type': 'application/json' }),
    });
    s.clearRequests();
    expect(s.requests).toHaveLength(0);
  });

  it('answers unknown paths with 404 and other methods with 405', async () => {
    const s = await sandbox();
    expectError(await post(s, '/ocs/v2/services', {}), 404, 'NOT_FOUND');
    const res = await request(`${s.url}${PROJECTS}`, { method: 'GET', dispatcher: agent });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('POST');
    await res.body.dump();
  });
});

describe('response shapes (the spec shows none)', () => {
  it.each(CLOUD_SHAPE_MODES.map((m) => [m.name, m] as const))(
    '%s: answers the token, the created id and the address exactly where the shape says',
    async (_name, mode) => {
      const s = await sandbox({ responseShape: mode.shape });
      const token = await post(s, TOKENS, { login: 'a' });
      expect(token.status).toBe(200);
      expect(Object.keys(token.body).sort()).toEqual([mode.shape.token, 'expires_in', 'token_type'].sort());
      expect(token.body[mode.shape.token]).toBe(s.issuedTokens[0]!.token);

      const project = await post(s, PROJECTS, { name: 'shaped', description: '' });
      expect(project.status).toBe(201);
      const at = (body: any, path: string) => path.split('.').reduce((v, k) => v?.[k], body);
      const projectId = at(project.body, mode.shape.id);
      expect(projectId).toBe(s.projects()[0]!.id);
      // The id is nowhere else: a reader that guesses another place finds nothing.
      for (const other of ['id', 'serviceId', 'data.id', 'metadata.id'].filter((p) => p !== mode.shape.id))
        expect(at(project.body, other)).toBeUndefined();

      const network = await post(s, SERVICES, envelope('network', 'network', projectId, networkSpec));
      const networkId = at(network.body, mode.shape.id);
      const ip = await post(s, SERVICES, envelope('ip', 'network', projectId, {}, networkId));
      expect(ip.status).toBe(201);
      const record = mode.shape.id === 'data.id' ? ip.body.data : ip.body;
      const address = s.resources('ip')[0]!.address;
      const fields = ['address', 'ipAddress', 'ip_address', 'ip', 'publicIp'];
      for (const f of fields) expect(record[f]).toBe(f === mode.shape.address ? address : undefined);
      expect(JSON.stringify(ip.body).includes(address!)).toBe(mode.shape.address !== 'absent');
    },
  );
});
