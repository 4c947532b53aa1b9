/**
 * The servers scenario 1 of `npm run bench` measures beside the gateway, checked cheaply so that a broken
 * setup fails `npm test` and not only the benchmark: each one, on port 0 over the bench's own upstream stub
 * (bench/servers/upstream.ts), takes one createNetwork and makes exactly one upstream POST
 * /ocs/v1/services with an Idempotency-Key, and its answer carries the created network's id.
 *
 * - Hive Gateway, over the OpenAPI description bench/peers/cloud-openapi.yaml composed at start-up with
 *   @graphql-mesh/compose-cli and @omnigraph/openapi (bench/peers/hive.ts);
 * - Apollo Server 5 with a hand-written resolver over undici (bench/peers/apollo.ts);
 * - the durable baseline (bench/servers/durable-baseline.ts), which must also write its SQLite rows.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { API_KEY, UPSTREAM_TOKEN } from '../../bench/lib/env.js';
import { spawnNode, type Proc } from '../../bench/lib/processes.js';
import { startApolloPeer } from '../../bench/peers/apollo.js';
import { startHivePeer } from '../../bench/peers/hive.js';
import { hiveMutationBody } from '../../bench/peers/requests.js';
import { CREATE_NETWORK } from '../../bench/scenarios/mutation.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PROJECT_ID = '0b5c3e8e-3f0e-4a63-9b1f-6f0c2f9d1a01';

interface StubStats {
  created: number;
  replayed: number;
  refused: number;
  last: { path: string; idempotencyKey: string; body: Record<string, any> } | null;
}

let stub: Proc;
let stubUrl: string;
let before: StubStats;

async function stats(): Promise<StubStats> {
  const res = await request(`${stubUrl}/__stats`);
  return (await res.body.json()) as StubStats;
}

async function post(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.statusCode, json: await res.body.json() };
}

/** The upstream saw exactly one POST since `before`, a valid first call of the network envelope. */
async function expectOneNetworkPost(): Promise<StubStats['last']> {
  const after = await stats();
  // created counts only POSTs with the bearer token, a JSON body and a UUID Idempotency-Key; every other
  // POST is refused or replayed.
  expect({
    created: after.created - before.created,
    replayed: after.replayed - before.replayed,
    refused: after.refused - before.refused,
  }).toEqual({
    created: 1,
    replayed: 0,
    refused: 0,
  });
  expect(after.last?.path).toBe('/ocs/v1/services');
  expect(after.last?.idempotencyKey).toMatch(UUID_RE);
  expect(after.last?.body).toMatchObject({
    kind: 'network',
    platform: { productCode: 'network', regionCode: 'msk' },
    projectId: PROJECT_ID,
    metadata: { title: 'bench-net' },
    spec: { 'vendor.extensions.network': { bandwidth_mbps: 100, default_gfw_rule_action: 'allow' } },
    zoneCode: 'msk-avntg',
  });
  return after.last;
}

const gatewayBody = () =>
  JSON.stringify({
    query: CREATE_NETWORK,
    variables: { input: { projectId: PROJECT_ID, title: 'bench-net' }, key: crypto.randomUUID() },
  });

describe('bench scenario 1 peers and durable baseline (one createNetwork each over the bench stub)', () => {
  beforeAll(async () => {
    stub = await spawnNode('upstream', { script: 'bench/servers/upstream.ts', cpus: null, readiness: { line: true } });
    stubUrl = String(stub.ready.url);
  });
  afterAll(async () => {
    await stub?.stop();
  });
  beforeEach(async () => {
    before = await stats();
  });

  it('Hive Gateway composes the OpenAPI description and sends one POST with the Idempotency-Key and the dotted spec key', async () => {
    const tokenBefore = process.env.CLOUD_API_TOKEN;
    const peer = await startHivePeer({ upstream: stubUrl, token: UPSTREAM_TOKEN });
    try {
      const body = hiveMutationBody(PROJECT_ID).replace('{{uuid}}', crypto.randomUUID());
      const { status, json } = await post(peer.url, body);
      expect(json.errors).toBeUndefined();
      expect(status).toBe(200);
      const last = await expectOneNetworkPost();
      expect(last?.idempotencyKey).toBe((JSON.parse(body) as { variables: { key: string } }).variables.key);
      expect(json.data.createService.id).toMatch(UUID_RE);
      expect(json.data.createService.metadata.title).toBe('bench-net');
    } finally {
      await peer.close();
      if (tokenBefore === undefined) delete process.env.CLOUD_API_TOKEN;
      else process.env.CLOUD_API_TOKEN = tokenBefore;
    }
  });

  it("Apollo Server 5 takes the gateway's own request bytes and sends one POST with the caller's key", async () => {
    const peer = await startApolloPeer({ upstream: stubUrl, token: UPSTREAM_TOKEN });
    try {
      const body = gatewayBody();
      const { status, json } = await post(peer.url, body);
      expect(json.errors).toBeUndefined();
      expect(status).toBe(200);
      const last = await expectOneNetworkPost();
      const key = (JSON.parse(body) as { variables: { key: string } }).variables.key;
      expect(last?.idempotencyKey).toBe(key);
      expect(json.data.createNetwork).toMatchObject({
        network: { title: 'bench-net' },
        idempotencyKey: key,
        replayed: false,
      });
      expect(json.data.createNetwork.network.id).toMatch(UUID_RE);
    } finally {
      await peer.close();
    }
  });

  it('the durable baseline sends one POST, then keeps the ledger row and the completed idempotency record on disk', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-baseline-'));
    const durable = await spawnNode('durable baseline', {
      script: 'bench/servers/durable-baseline.ts',
      args: ['--upstream', stubUrl, '--token', UPSTREAM_TOKEN, '--api-key', API_KEY, '--data-dir', dir],
      cpus: null,
      readiness: { line: true },
    });
    try {
      const url = String(durable.ready.url);
      expect((await post(`${url}/seed`, JSON.stringify({ projectId: PROJECT_ID }))).status).toBe(200);
      before = await stats();
      const body = gatewayBody();
      const { status, json } = await post(`${url}/mutation`, body, { authorization: `Bearer ${API_KEY}` });
      expect(json.errors).toBeUndefined();
      expect(status).toBe(200);
      await expectOneNetworkPost();
      const id = json.data.createNetwork.network.id as string;
      expect(id).toMatch(UUID_RE);

      const db = new SQLite(path.join(dir, 'durable-baseline.sqlite'), { readonly: true });
      try {
        expect(db.prepare(`select kind, project_id from resources where id = ?`).get(id)).toEqual({
          kind: 'network',
          project_id: PROJECT_ID,
        });
        const key = (JSON.parse(body) as { variables: { key: string } }).variables.key;
        const rec = db.prepare(`select state, response from idempotency_records where key = ?`).get(key) as {
          state: string;
          response: string;
        };
        expect(rec.state).toBe('done');
        // As the gateway's record keeps it by default (IDEMPOTENCY_REPLAY_FROM_LEDGER): the id of the ledger's row.
        expect(JSON.parse(rec.response)).toEqual({ ledger: id });
      } finally {
        db.close();
      }
      // An unknown project changes nothing upstream.
      before = await stats();
      const missing = await post(`${url}/mutation`, body.replace(PROJECT_ID, '0b5c3e8e-3f0e-4a63-9b1f-6f0c2f9d1a02'), {
        authorization: `Bearer ${API_KEY}`,
      });
      expect(missing.json.errors[0].extensions.code).toBe('NOT_FOUND');
      expect((await stats()).created).toBe(before.created);
    } finally {
      await durable.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
