import net from 'node:net';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClient } from '../helpers/mcp.js';
import { subscribers, waitFor } from '../helpers/wait.js';

/** A graphql-ws connection the gateway acknowledged, and the close code it ends with. */
async function acknowledged(gw: TestGateway) {
  const ws = new WebSocket(gw.url.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws');
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const acked = new Promise<void>((resolve) => ws.once('message', () => resolve()));
  ws.send(JSON.stringify({ type: 'connection_init' }));
  await acked;
  return { ws, closed };
}

describe('graceful shutdown', () => {
  it('lets an in-flight mutation finish before closing', async () => {
    const gw = await startTestGateway();
    // The upstream holds the mutation's call until the gateway has stopped accepting: in flight by construction.
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    const inFlight = gw.graphql(M.project, { input: { name: 'draining' } });
    await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBeGreaterThan(0);
    const closed = gw.close();
    await expect.poll(() => gw.gateway.server.listening, { timeout: 20_000 }).toBe(false);
    held.release();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(res.errors).toBeUndefined();
    expect(res.data!.createProject.project.id).toBeTruthy();
    await closed;
    await expect(fetch(`${gw.url}/healthz`)).rejects.toThrow();
  });

  it('answers an MCP wait_for_events with its cursor instead of holding the drain', async () => {
    const gw = await startTestGateway({ GATEWAY_API_KEYS: 'alpha:key-a' });
    const agent = await mcpClient(gw, { key: 'key-a' });
    const { cursor } = (await agent.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 }))
      .structuredContent as { cursor: string };
    const waiting = agent.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    await waitFor(() => subscribers(gw, 'mobile-id', null) === 1, 20_000, 'the wait held');
    const closed = gw.close();
    // Answered as a wait that ended with nothing new: the agent calls again, on another start, from the same cursor.
    const answered = await waiting;
    expect(answered.isError).toBeFalsy();
    expect(answered.structuredContent).toMatchObject({ events: [], timedOut: false });
    // The same position as the cursor it was given (a cursor's text also carries the second it was handed out in).
    const positionOf = (c: unknown) => {
      const { floor, ranges } = gw.gateway.services.events.cursors.decode(String(c), 3_600_000).position;
      return { floor, ranges };
    };
    expect(positionOf(answered.structuredContent!.cursor)).toEqual(positionOf(cursor));
    await closed;
    await agent.close().catch(() => undefined);
  });

  it('stops accepting and is not ready as soon as it shuts down, while a WebSocket peer leaves its close unanswered', async () => {
    const gw = await startTestGateway();
    // A peer that reads nothing more (a vanished mobile client): the gateway's close frame gets no answer.
    const silent = await acknowledged(gw);
    (silent.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const polite = await acknowledged(gw);
    const closed = gw.close();
    // The shutdown has begun: the peers are told to go away.
    expect(await polite.closed).toBe(1001);
    const readyz = await fetch(`${gw.url}/readyz`).then(
      (res) => res.status,
      () => 'refused',
    );
    expect(readyz).not.toBe(200);
    silent.ws.terminate();
    await closed;
  });

  it('answers /readyz 503 from the moment it shuts down, on a keep-alive connection opened before', async () => {
    const gw = await startTestGateway();
    const { hostname, port } = new URL(gw.url);
    const socket = net.connect(Number(port), hostname);
    let received = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => (received += chunk));
    const statuses = () => [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    const readyz = 'GET /readyz HTTP/1.1\r\nHost: gateway\r\n\r\n';
    socket.write(readyz);
    await expect.poll(statuses, { timeout: 20_000 }).toEqual([200]);
    // A mutation the upstream holds keeps the connection busy, so the drain's sweep of idle connections leaves it open.
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    const body = JSON.stringify({ query: 'mutation { createProject(input: { name: "held" }) { project { id } } }' });
    socket.write(
      `POST /graphql HTTP/1.1\r\nHost: gateway\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBeGreaterThan(0);
    const closed = gw.close();
    await expect.poll(() => gw.gateway.server.listening, { timeout: 20_000 }).toBe(false);
    // The shutdown has begun: a load balancer's probe on this connection is told the replica is not ready.
    const probed = new Promise<void>((resolve) =>
      gw.gateway.server.on('request', (req: { url?: string }) => req.url === '/readyz' && resolve()),
    );
    socket.write(readyz);
    await probed;
    held.release();
    await expect.poll(() => statuses().length, { timeout: 20_000 }).toBe(3);
    expect(statuses()).toEqual([200, 200, 503]);
    socket.destroy();
    await closed;
  });
});
