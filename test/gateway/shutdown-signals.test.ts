// SIGTERM on a real gateway process (node src/main.ts), observed over real clients (docs/operations.md, Shutdown):
// it stops accepting, closes the streams it holds (graphql-ws with 1001, SSE and MCP subscriptions/listen streams
// ended), lets a creation in flight at the upstream finish and answer, and exits 0; a second signal during the drain
// changes nothing; a restart on the same DATA_DIR replays the creation and delivers an event stored before the stop.
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from '../../src/sandbox/cloud.js';
import { tempDataDir } from '../helpers/gateway.js';
import { mcpClient } from '../helpers/mcp.js';
import { gatewayProcesses, type GatewayProcess } from '../helpers/process.js';
import { readToEnd } from '../helpers/raw-http.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'shutdown-app-key';
const spawnGateway = gatewayProcesses();
const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

function exited(p: GatewayProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (p.child.exitCode !== null || p.child.signalCode !== null)
      return resolve({ code: p.child.exitCode, signal: p.child.signalCode });
    p.child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

async function graphql(url: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const res = await request(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ query, variables }),
  });
  return res.body.json();
}

describe('SIGTERM closes every stream the gateway holds', () => {
  it('closes graphql-ws with 1001, ends SSE and MCP listen streams, and exits 0', async () => {
    const gw = await spawnGateway({
      DATA_DIR: tempDataDir(),
      GATEWAY_API_KEYS: KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm,mobile-id',
    });

    // graphql-ws: a subscription that stays open.
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws', {
      headers: { authorization: `Bearer ${KEY}` },
    });
    const wsClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    const wsTicked = new Promise<void>((resolve) =>
      ws.on('message', (data) => {
        const message = JSON.parse(data.toString()) as { type: string };
        if (message.type === 'connection_ack')
          ws.send(
            JSON.stringify({
              id: '1',
              type: 'subscribe',
              payload: { query: 'subscription { heartbeat(intervalMs: 10, count: 1000) }' },
            }),
          );
        if (message.type === 'next') resolve();
      }),
    );
    ws.once('open', () => ws.send(JSON.stringify({ type: 'connection_init' })));
    await wsTicked;

    // SSE: a subscription that stays open, one tick read.
    const sse = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ query: 'subscription { heartbeat(intervalMs: 10, count: 1000) }' }),
    });
    expect(sse.statusCode).toBe(200);
    let sseTicked!: () => void;
    const sseTick = new Promise<void>((r) => (sseTicked = r));
    const sseEnd = readToEnd(sse.body, (text) => text.includes('event: next') && sseTicked());
    await sseTick;

    // MCP: a subscriptions/listen stream, acknowledged.
    const mcp = await request(`${gw.url}/mcp`, {
      method: 'POST',
      headers: {
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        'mcp-method': 'subscriptions/listen',
        'mcp-protocol-version': '2026-07-28',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'listen-1',
        method: 'subscriptions/listen',
        params: { _meta: META, notifications: { resourceSubscriptions: ['mobileid://authentications/held-open'] } },
      }),
    });
    expect(mcp.headers['content-type']).toMatch(/^text\/event-stream/);
    let mcpAcked!: () => void;
    const mcpAck = new Promise<void>((r) => (mcpAcked = r));
    const mcpEnd = readToEnd(
      mcp.body,
      (text) => text.includes('notifications/subscriptions/acknowledged') && mcpAcked(),
    );
    await mcpAck;

    const exit = exited(gw);
    gw.child.kill('SIGTERM');
    expect(await wsClosed).toBe(1001);
    expect(await sseEnd).toBe('ended');
    // Ended by the gateway, not cut when the drain's deadline passed.
    expect(await mcpEnd).toBe('ended');
    expect(await exit).toEqual({ code: 0, signal: null });
    expect(gw.output()).toContain('shutdown complete');
  }, 60_000);

  it('a graphql-ws peer that never answers its 1001 does not hold the exit: exits 0', async () => {
    const gw = await spawnGateway({ DATA_DIR: tempDataDir(), GATEWAY_API_KEYS: KEY });
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const acked = new Promise<void>((resolve) => ws.once('message', () => resolve()));
    ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${KEY}` } }));
    await acked;
    // A peer that vanished (a phone gone out of range): it reads nothing more, so the close frame gets no answer.
    (ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const exit = exited(gw);
    gw.child.kill('SIGTERM');
    expect(await exit).toEqual({ code: 0, signal: null });
    expect(gw.output()).toContain('shutdown complete');
    ws.terminate();
  });

  it('SIGINT (Ctrl-C in a terminal) shuts down as SIGTERM does: drained, logged, exit 0', async () => {
    const gw = await spawnGateway({ DATA_DIR: tempDataDir(), GATEWAY_API_KEYS: KEY });
    const exit = exited(gw);
    gw.child.kill('SIGINT');
    expect(await exit).toEqual({ code: 0, signal: null });
    expect(gw.output()).toContain('"signal":"SIGINT"');
    expect(gw.output()).toContain('shutdown complete');
  });
});

describe('SIGTERM with a creation in flight at the upstream', () => {
  let cloud: CloudSandbox;
  beforeAll(async () => {
    cloud = await startCloudSandbox();
  });
  afterAll(() => cloud.close());

  const env = (dataDir: string) => ({
    DATA_DIR: dataDir,
    CLOUD_API_URL: cloud.url,
    CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
    SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    GATEWAY_API_KEYS: KEY,
  });
  const CREATE = `mutation($input: CreateNetworkInput!, $key: UUID) { createNetwork(input: $input, idempotencyKey: $key) { network { id title } idempotencyKey replayed } }`;
  const PROJECT = `mutation($key: UUID) { createProject(input: { name: "shutdown" }, idempotencyKey: $key) { project { id } } }`;

  it('answers it, refuses new connections, ignores a second SIGTERM, exits 0; a restart replays it', async () => {
    const dataDir = tempDataDir();
    const first = await spawnGateway(env(dataDir));
    const project = await graphql(first.url, PROJECT, { key: randomUUID() });
    expect(project.errors).toBeUndefined();
    const title = `shutdown-${randomUUID()}`;
    const variables = {
      input: { projectId: project.data.createProject.project.id, title, bandwidthMbps: 100 },
      key: randomUUID(),
    };

    const held = cloud.faults.hold();
    const pending = graphql(first.url, CREATE, variables);
    await waitFor(() => held.arrived() > 0, 20_000, 'the creation at the upstream');
    const exit = exited(first);
    first.child.kill('SIGTERM');
    await first.waitFor('shutting down');
    // Not accepting any more: a new connection is refused.
    await expect(fetch(`${first.url}/readyz`)).rejects.toThrow();
    // A second signal during the drain changes nothing: the creation in flight is still answered.
    first.child.kill('SIGTERM');
    first.child.kill('SIGINT');
    held.release();
    const answered = await pending;
    expect(answered.errors, JSON.stringify(answered.errors)).toBeUndefined();
    expect(answered.data.createNetwork.replayed).toBe(false);
    const network = answered.data.createNetwork.network;
    expect(await exit).toEqual({ code: 0, signal: null });
    expect(first.output().match(/shutting down/g)).toHaveLength(1);

    // Same DATA_DIR: the acknowledged creation is there, and the app's retry replays it without an upstream call.
    const second = await spawnGateway(env(dataDir));
    const upstreamCalls = cloud.requests.length;
    const retried = await graphql(second.url, CREATE, variables);
    expect(retried.errors).toBeUndefined();
    expect(retried.data.createNetwork).toMatchObject({ network, replayed: true });
    expect(cloud.requests.length).toBe(upstreamCalls);
    expect(cloud.resources('network').filter((r) => r.title === title)).toHaveLength(1);
    const exit2 = exited(second);
    second.child.kill('SIGTERM');
    expect(await exit2).toEqual({ code: 0, signal: null });
  }, 120_000);

  it('held past the drain: its connection is cut, and the retry on the next start ends in one upstream resource', async () => {
    const dataDir = tempDataDir();
    // Short leases: the key the stopped process claimed is taken over soon after the restart (no live call races it:
    // the retries are sent one after another). The retry's call must be answered: an attempt timeout far longer than a
    // round trip, which a stall of the machine cannot outlast.
    const shortLeases = { IDEMPOTENCY_WAIT: '1s', IDEMPOTENCY_TAKEOVER: '1s', UPSTREAM_TIMEOUT: '60s' };
    // The first start waits for the upstream longer than its drain lasts.
    const first = await spawnGateway({ ...env(dataDir), UPSTREAM_TIMEOUT: '5m', UPSTREAM_RETRY_BUDGET: '5m' });
    const project = await graphql(first.url, PROJECT, { key: randomUUID() });
    const title = `past-the-drain-${randomUUID()}`;
    const variables = {
      input: { projectId: project.data.createProject.project.id, title, bandwidthMbps: 100 },
      key: randomUUID(),
    };
    const held = cloud.faults.hold();
    const pending = graphql(first.url, CREATE, variables).catch((err: unknown) => err);
    await waitFor(() => held.arrived() > 0, 20_000, 'the creation at the upstream');
    const exit = exited(first);
    first.child.kill('SIGTERM');
    // The drain's deadline passes with the creation still held: the connection is cut, the process exits.
    expect(await pending).toBeInstanceOf(Error);
    expect((await exit).code).toBe(0);
    // Given up, not a bug: nothing logged as unexpected.
    expect(first.output()).not.toContain('unexpected error');
    expect(first.output()).toContain('shutdown complete');
    // The upstream then does the work of the request it held: the retry must find it, never create a second.
    held.release();
    await waitFor(() => cloud.resources('network').some((r) => r.title === title), 20_000, 'the held creation done');

    const second = await spawnGateway({ ...env(dataDir), ...shortLeases });
    let retried: any;
    await waitFor(
      async () => {
        retried = await graphql(second.url, CREATE, variables);
        return retried.errors?.[0]?.extensions?.code !== 'IDEMPOTENCY_KEY_IN_USE';
      },
      60_000,
      'the key taken over',
    );
    expect(retried.errors, JSON.stringify(retried.errors)).toBeUndefined();
    const networks = cloud.resources('network').filter((r) => r.title === title);
    expect(networks).toHaveLength(1);
    expect(networks[0]!.id).toBe(retried.data.createNetwork.network.id);
  }, 120_000);
});

describe('an event acknowledged before SIGTERM', () => {
  it('is delivered once after a restart on the same DATA_DIR to an agent resuming from its cursor', async () => {
    const env = {
      DATA_DIR: tempDataDir(),
      GATEWAY_API_KEYS: KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm,mobile-id',
    };
    const first = await spawnGateway(env);
    const agent = await mcpClient(first, { key: KEY });
    const { cursor } = (await agent.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 }))
      .structuredContent as { cursor: string };
    const waiting = agent.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    const issued = await graphql(first.url, ISSUE, { id: 'before-the-stop' });
    const notified = await request(`${first.url}/webhooks/mobile-id`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${issued.data.issueMobileIdNotificationToken.token}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        auth_req_id: 'before-the-stop',
        error: 'access_denied',
        error_description: 'client timeout',
      }),
    });
    expect(notified.statusCode).toBe(204);
    await notified.body.dump();
    // The wait may have been answered with the event, or at the shutdown with nothing new: either way its cursor is
    // where the agent resumes.
    const exit = exited(first);
    first.child.kill('SIGTERM');
    const answered = (await waiting).structuredContent as { events: { key: string }[]; cursor: string };
    expect(await exit).toEqual({ code: 0, signal: null });
    await agent.close().catch(() => undefined);

    const second = await spawnGateway(env);
    const again = await mcpClient(second, { key: KEY });
    const resumed = (
      await again.call('wait_for_events', { cursor: answered.cursor, kinds: ['mobile-id'], timeoutSeconds: 0 })
    ).structuredContent as { events: { key: string }[]; cursor: string };
    expect([...answered.events, ...resumed.events].map((e) => e.key)).toEqual(['before-the-stop']);
    const fromStart = (await again.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 0 }))
      .structuredContent as { events: { key: string }[] };
    expect(fromStart.events.map((e) => e.key)).toEqual(['before-the-stop']);
    await again.close().catch(() => undefined);
  }, 120_000);
});
