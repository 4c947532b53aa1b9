import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from '../../src/sandbox/cloud.js';
import { tempDataDir } from '../helpers/gateway.js';
import { gatewayProcesses, type GatewayProcess } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * kill -9 at each phase of a mutation and of webhook intake (docs/decisions/014), with real child processes: the gateway runs
 * as `node src/main.ts`; the cloud upstream is a sandbox in this process, so it outlives the gateway and its resources
 * can be counted. GATEWAY_TEST_PAUSE_AT stops the child exactly at a phase (src/phases.ts).
 */
const KEY = 'crash-app-key';
const spawnGateway = gatewayProcesses();

type Child = GatewayProcess & {
  /** Resolves when the child logs that it paused at a phase. */
  paused: Promise<void>;
};

async function startChild(env: Record<string, string>): Promise<Child> {
  const started = await spawnGateway(env);
  return { ...started, paused: started.waitFor('paused at a test phase') };
}

async function kill9(c: Child): Promise<void> {
  const exited = new Promise<NodeJS.Signals | null>((r) => c.child.once('exit', (_code, signal) => r(signal)));
  c.child.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
}

async function stop(c: Child): Promise<void> {
  const exited = new Promise((r) => c.child.once('exit', r));
  c.child.kill('SIGTERM');
  await exited;
}

const CREATE = `mutation($input: CreateNetworkInput!, $key: UUID) { createNetwork(input: $input, idempotencyKey: $key) { network { id title } idempotencyKey replayed } }`;
const PROJECT = `mutation($key: UUID) { createProject(input: { name: "crash" }, idempotencyKey: $key) { project { id } } }`;
const READ = `query($id: ID!) { node(id: $id) { id ... on Network { title } } }`;

async function graphql(url: string, query: string, variables: Record<string, unknown>): Promise<any> {
  const res = await request(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ query, variables }),
  });
  return res.body.json();
}

/** Retries with the same key as an app would: while the dead process's claim holds the key, IN_USE, then it goes through. */
async function retryUntilDone(url: string, variables: Record<string, unknown>): Promise<any> {
  for (let attempt = 0; attempt < 60; attempt++) {
    const res = await graphql(url, CREATE, variables);
    if (res.errors?.[0]?.extensions?.code !== 'IDEMPOTENCY_KEY_IN_USE') return res;
    await sleep(500);
  }
  throw new Error('the key stayed in use');
}

describe('kill -9 during a mutation, then a retry with the same key', () => {
  let cloud: CloudSandbox;
  beforeAll(async () => {
    cloud = await startCloudSandbox();
  });
  afterAll(() => cloud.close());

  // Short timeouts: the lease of the dead process's claim (IDEMPOTENCY_TAKEOVER) passes quickly. No fault here needs a
  // short attempt timeout (the call in flight dies with its process): a long one, which a stall of the machine during
  // a round trip that must be answered cannot outlast.
  const env = (dataDir: string, extra: Record<string, string> = {}) => ({
    DATA_DIR: dataDir,
    CLOUD_API_URL: cloud.url,
    CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
    SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    GATEWAY_API_KEYS: KEY,
    UPSTREAM_TIMEOUT: '60s',
    UPSTREAM_RETRY_BUDGET: '1s',
    IDEMPOTENCY_WAIT: '1s',
    IDEMPOTENCY_TAKEOVER: '1s',
    ...extra,
  });
  const networksWithTitle = (title: string) => cloud.resources('network').filter((r) => r.title === title);

  async function setup(dataDir: string): Promise<string> {
    const c = await startChild(env(dataDir));
    const res = await graphql(c.url, PROJECT, { key: randomUUID() });
    expect(res.errors).toBeUndefined();
    await stop(c);
    return res.data.createProject.project.id;
  }

  it.each([
    { phase: 'mutation-claimed', what: 'after the claim, before any upstream call', upstreamBeforeRestart: 0 },
    {
      phase: 'upstream-answered',
      what: 'after the upstream created the resource and answered, before the ledger write',
      upstreamBeforeRestart: 1,
    },
    {
      phase: 'upstream-in-flight',
      what: 'while the upstream call is in flight (work done upstream, answer not yet back)',
      upstreamBeforeRestart: 1,
    },
  ])(
    'killed $what: the retry with the same key ends in exactly one upstream resource',
    async ({ phase, upstreamBeforeRestart }) => {
      const dataDir = tempDataDir();
      const projectId = await setup(dataDir);
      const title = `crash-${phase}`;
      const variables = { input: { projectId, title, bandwidthMbps: 100 }, key: randomUUID() };

      const inFlight = phase === 'upstream-in-flight';
      if (inFlight) {
        cloud.faults.slowMs = 120_000;
        cloud.faults.enqueueFor('/ocs/v1/services', 'slow');
      }
      const first = await startChild(env(dataDir, inFlight ? {} : { GATEWAY_TEST_PAUSE_AT: phase }));
      const pending = graphql(first.url, CREATE, variables).catch((err: unknown) => err);
      if (inFlight) {
        await waitFor(() => networksWithTitle(title).length > 0, 20_000, 'the network request at the upstream');
      } else {
        await first.paused;
      }
      await kill9(first);
      expect(await pending).toBeInstanceOf(Error);
      expect(networksWithTitle(title)).toHaveLength(upstreamBeforeRestart);

      const second = await startChild(env(dataDir));
      const retried = await retryUntilDone(second.url, variables);
      expect(retried.errors, JSON.stringify(retried.errors)).toBeUndefined();
      const network = retried.data.createNetwork.network;
      expect(networksWithTitle(title)).toHaveLength(1);
      expect(networksWithTitle(title)[0]!.id).toBe(network.id);
      // The ledger holds it, and a further retry replays without an upstream call.
      expect((await graphql(second.url, READ, { id: network.id })).data.node).toEqual({ id: network.id, title });
      const requests = cloud.requests.length;
      const again = await graphql(second.url, CREATE, variables);
      expect(again.data.createNetwork).toMatchObject({ network, replayed: true });
      expect(cloud.requests.length).toBe(requests);
      await stop(second);
      cloud.faults.clear();
    },
    120_000,
  );
});

describe('kill -9 during webhook intake, then the sender retries', () => {
  const notification = (authReqId: string) => ({
    auth_req_id: authReqId,
    error: 'access_denied',
    error_description: 'user refused',
  });
  // The sandbox's token is a secret of the data directory, shown on the start-up line (the same on every start).
  const tokenOf = (c: Child) =>
    /mobile-ID sandbox: POST \S+ with Authorization: Bearer (sandbox-[0-9a-f]+)/.exec(c.line)![1]!;
  const post = (c: Child, body: unknown) =>
    request(`${c.url}/webhooks/mobile-id`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokenOf(c)}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it.each([
    { phase: 'webhook-received', what: 'after the notification was read, before it was stored' },
    { phase: 'webhook-stored', what: 'after it was stored, before the 204' },
  ])(
    'killed $what: nothing was acknowledged, the retry is acknowledged, and the event is stored once',
    async ({ phase }) => {
      const dataDir = tempDataDir();
      const authReqId = `crash-${phase}-${randomUUID()}`;
      // Every upstream sandboxed: the mobile-ID sandbox's notification token is accepted.
      const first = await startChild({ DATA_DIR: dataDir, GATEWAY_TEST_PAUSE_AT: phase });
      const pending = post(first, notification(authReqId)).then(
        (r) => r.statusCode,
        (err: unknown) => err,
      );
      await first.paused;
      await kill9(first);
      // Never acknowledged: the sender saw the connection fail, so it still holds the notification.
      expect(await pending).toBeInstanceOf(Error);

      const second = await startChild({ DATA_DIR: dataDir });
      const res = await post(second, notification(authReqId));
      expect(res.statusCode).toBe(204);
      await res.body.dump();
      const read = await request(`${second.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          query: `query($id: String!) { mobileIdAuthentication(authReqId: $id) { __typename ... on MobileIdAuthenticationFailed { reason } } }`,
          variables: { id: authReqId },
        }),
      });
      expect(((await read.body.json()) as any).data.mobileIdAuthentication).toMatchObject({
        __typename: 'MobileIdAuthenticationFailed',
      });
      await stop(second);

      const db = new Database(path.join(dataDir, 'gateway.sqlite'), { readonly: true });
      try {
        const { n } = db
          .prepare(`select count(*) as n from events where kind = 'mobile-id' and key = ?`)
          .get(authReqId) as { n: number };
        expect(n).toBe(1);
      } finally {
        db.close();
      }
    },
    120_000,
  );
});
