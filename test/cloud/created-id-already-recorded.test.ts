import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

import {
  SANDBOX_SERVICE_ACCOUNT_TOKEN,
  SERVICES_PATH,
  startCloudSandbox,
  type CloudSandbox,
} from '../../src/sandbox/cloud.js';
import { M, ok } from '../helpers/cloud.js';
import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

/**
 * A 2xx creation whose answer carries an id the ledger already holds for another creation (another idempotency key)
 * is not recorded: recorded, the new resource would be lost behind the first record, and the caller handed another
 * resource's id. It answers UPSTREAM_ANSWER_INCOMPLETE, its answer kept with the key, and the first record stays.
 * The sandbox cloud answers over loopback HTTP through a stand-in that can put a chosen id in a subnet's answer.
 */

const gateway = gatewaysPerTest();
const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()));
});

let pg: TestPostgres | undefined;
// After every test's gateways have closed.
afterAll(async () => {
  await pg?.stop();
});

const API_KEY = 'created-id-already-recorded-app';
/** Headers of the stand-in's own connection, not forwarded. */
const HOP_BY_HOP = new Set(['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);

/**
 * The sandbox cloud behind a loopback stand-in that answers a subnet's creation with the id `idOf` names, when it
 * names one (the sandbox created the subnet all the same).
 */
async function cloudAnsweringSubnetsWith(
  idOf: (sandbox: CloudSandbox) => string | undefined,
): Promise<{ url: string; sandbox: CloudSandbox }> {
  const sandbox = await startCloudSandbox();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(req.headers))
          if (typeof value === 'string' && !HOP_BY_HOP.has(name)) headers[name] = value;
        const answer = await fetch(`${sandbox.url}${req.url}`, {
          method: req.method!,
          headers,
          ...(body.length > 0 ? { body } : {}),
        });
        let text = await answer.text();
        const sent = body.length > 0 ? (JSON.parse(body.toString()) as { kind?: string }) : {};
        if (req.method === 'POST' && req.url === SERVICES_PATH && sent.kind === 'subnet' && idOf(sandbox)) {
          text = JSON.stringify({ ...(JSON.parse(text) as object), id: idOf(sandbox) });
        }
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
        res.end(text);
      })().catch((error: unknown) => {
        res.writeHead(599);
        res.end(String(error instanceof Error ? (error.cause ?? error) : error));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closing.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await sandbox.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sandbox };
}

/** A gateway on `url` as its cloud API; its store in a new data folder, or `store` (DATABASE_URL). */
function gatewayOn(url: string, store: Record<string, string> = { DATA_DIR: tempDataDir() }): Promise<TestGateway> {
  return gateway({
    ...store,
    CLOUD_API_URL: url,
    CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
    SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    GATEWAY_API_KEYS: API_KEY,
    UPSTREAM_MAX_RETRIES: '0',
  });
}

const STATUS = `query($id: ID!) {
  provisioning(id: $id) { state error { code } steps { name state resourceId error { code } } }
}`;

/** A subnet's creation answered with its network's id (on a gateway whose store `store` names): nothing recorded. */
async function subnetAnsweredWithItsNetworkId(store?: Record<string, string>): Promise<void> {
  let networkId = '';
  const cloud = await cloudAnsweringSubnetsWith(() => networkId || undefined);
  const gw = await gatewayOn(cloud.url, store);
  const projectId = (await ok(gw, M.project, { input: { name: 'p' } }, API_KEY)).project.id;
  networkId = (await ok(gw, M.network, { input: { projectId, title: 'net', bandwidthMbps: 100 } }, API_KEY)).network.id;

  const key = randomUUID();
  const input = { projectId, networkId, title: 'sub', cidr: '10.20.0.0/24' };
  const res = await gw.graphql(M.subnet, { input, key }, { key: API_KEY });
  expect(res.data?.createSubnet ?? null).toBeNull();
  expect(res.errors![0]!.extensions).toMatchObject({
    code: 'UPSTREAM_ANSWER_INCOMPLETE',
    upstream: 'cloud',
    status: 201,
    idempotencyKey: key,
  });
  expect(res.errors![0]!.message).toContain(networkId);
  const network = await gw.gateway.services.ledger.get(networkId);
  expect(network).toMatchObject({ id: networkId, kind: 'network', title: 'net' });
  expect(await gw.gateway.services.ledger.childrenOf('subnet', [networkId])).toEqual([[]]);

  // The key keeps the answer: the same call again reads it again, sends nothing, and answers the same.
  const sent = cloud.sandbox.requests.length;
  const again = await gw.graphql(M.subnet, { input, key }, { key: API_KEY });
  expect(again.errors![0]!.extensions).toMatchObject({ code: 'UPSTREAM_ANSWER_INCOMPLETE', idempotencyKey: key });
  expect(cloud.sandbox.requests.length).toBe(sent);
  expect((await gw.gateway.services.ledger.get(networkId))?.kind).toBe('network');
}

describe('a cloud creation answered with an id the ledger holds for another creation', () => {
  it('createSubnet answered with its network id: UPSTREAM_ANSWER_INCOMPLETE, the network stays a network', async () => {
    await subnetAnsweredWithItsNetworkId();
  });

  it('the same on PostgreSQL', async () => {
    pg = await startPostgres();
    await subnetAnsweredWithItsNetworkId({ DATABASE_URL: await pg.createDatabase('gateway') });
  }, 60_000);

  it('provisionKafkaCluster whose subnet step is answered with the network id fails at that step', async () => {
    // The subnet's answer names the network the sandbox created before it.
    const cloud = await cloudAnsweringSubnetsWith((s) => s.resources().find((r) => r.kind === 'network')?.id);
    const gw = await gatewayOn(cloud.url);
    const sandbox = cloud.sandbox;
    const res = await gw.graphql(
      `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
        provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id } }
      }`,
      {
        input: {
          project: { name: 'composite' },
          network: { title: 'net' },
          subnet: { title: 'sub', cidr: '10.50.0.0/24' },
          ipAddress: { title: 'public' },
          cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
          topics: [{ name: 'orders', replicationFactor: 3 }],
          users: [],
        },
        key: randomUUID(),
      },
      { key: API_KEY },
    );
    expect(res.errors).toBeUndefined();
    await gw.gateway.services.provisioning.idle();
    const status = await gw.graphql(STATUS, { id: res.data!.provisionKafkaCluster.provisioning.id }, { key: API_KEY });
    expect(status.errors).toBeUndefined();
    const p = status.data!.provisioning;
    expect(p.state).toBe('FAILED');
    expect(p.error).toEqual({ code: 'UPSTREAM_ANSWER_INCOMPLETE' });
    const steps = p.steps as { name: string; state: string; resourceId: string | null }[];
    expect(steps.slice(0, 3).map((s) => `${s.name}:${s.state}`)).toEqual([
      'project:DONE',
      'network:DONE',
      'subnet:FAILED',
    ]);
    const networkId = steps[1]!.resourceId!;
    expect(networkId).toBe(sandbox.resources().find((r) => r.kind === 'network')!.id);
    expect(steps[2]!.resourceId).toBeNull();
    expect(steps.slice(3).every((s) => s.state !== 'DONE')).toBe(true);
    expect((await gw.gateway.services.ledger.get(networkId))?.kind).toBe('network');
    expect(sandbox.requests.some((r) => (r.body as { kind?: string } | undefined)?.kind === 'compute')).toBe(false);
  });
});
