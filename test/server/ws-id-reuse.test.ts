// A subscription the client completes while it is being set up, its id then used again at once: the first one's stream
// is ended unread, and only the second one's results are written under the id (src/server/ws-protocol.ts).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ExecutionResult } from 'graphql';
import { handleProtocols } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';

import { graphqlTransportWs, type Operated } from '../../src/server/ws-protocol.js';

/** A stream the test pushes results into; `returned` once its consumer ended it. */
class PushStream implements AsyncIterator<ExecutionResult> {
  constructor(private readonly changed: () => void) {}
  returned = false;
  nextCalls = 0;
  private readonly queued: ExecutionResult[] = [];
  private waiting: ((r: IteratorResult<ExecutionResult>) => void) | null = null;

  push(value: ExecutionResult): void {
    const waiting = this.waiting;
    this.waiting = null;
    if (waiting) waiting({ done: false, value });
    else this.queued.push(value);
  }

  next(): Promise<IteratorResult<ExecutionResult>> {
    this.nextCalls += 1;
    this.changed();
    const value = this.queued.shift();
    if (value) return Promise.resolve({ done: false, value });
    return new Promise((resolve) => (this.waiting = resolve));
  }

  return(): Promise<IteratorResult<ExecutionResult>> {
    this.returned = true;
    this.changed();
    this.waiting?.({ done: true, value: undefined });
    this.waiting = null;
    return Promise.resolve({ done: true, value: undefined });
  }
}

/** Waits until `check` holds, each time something happened on the server's side or the client's. */
function until(check: () => boolean, signals: Array<() => void>): Promise<void> {
  if (check()) return Promise.resolve();
  return new Promise((resolve) => {
    const wake = () => {
      if (check()) resolve();
      else signals.push(wake);
    };
    signals.push(wake);
  });
}

describe('a subscription id used again while its first subscription is set up', () => {
  const signals: Array<() => void> = [];
  const signal = () => signals.splice(0).forEach((s) => s());
  /** Each subscribe the hook got, with the way to finish its setup. */
  const setups: Array<(operated: Operated) => void> = [];
  const http = createServer();
  const wss = new WebSocketServer({ noServer: true, handleProtocols });
  const protocol = graphqlTransportWs<null>({
    connect: () => true,
    subscribe: () =>
      new Promise<Operated>((resolve) => {
        setups.push(resolve);
        signal();
      }),
    failed: () => undefined,
  });
  http.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => protocol.open(ws, req, null)));
  let url = '';

  beforeAll(async () => {
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    url = `ws://127.0.0.1:${(http.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    for (const client of wss.clients) client.terminate();
    await new Promise((resolve) => wss.close(resolve));
    await new Promise((resolve) => http.close(resolve));
  });

  it('ends the first one unread and writes only the second one under the id', async () => {
    const ws = new WebSocket(url, 'graphql-transport-ws');
    const messages: Array<{ id?: string; type: string; payload?: unknown }> = [];
    ws.on('message', (data) => {
      messages.push(JSON.parse(String(data)) as (typeof messages)[number]);
      signal();
    });
    await new Promise((resolve) => ws.once('open', resolve));
    ws.send('{"type":"connection_init"}');
    await until(() => messages.length === 1, signals);
    expect(messages[0]).toEqual({ type: 'connection_ack' });

    const subscribe = JSON.stringify({ id: 'x', type: 'subscribe', payload: { query: 'subscription { s }' } });
    ws.send(subscribe);
    await until(() => setups.length === 1, signals);
    ws.send('{"id":"x","type":"complete"}');
    ws.send(subscribe);
    await until(() => setups.length === 2, signals);

    const first = new PushStream(signal);
    const second = new PushStream(signal);
    setups[0]!({ stream: first });
    setups[1]!({ stream: second });
    await until(() => first.returned && second.nextCalls === 1, signals);
    first.push({ data: { s: 'from the completed one' } });
    second.push({ data: { s: 'from the second one' } });
    await until(() => messages.length === 2, signals);
    expect(messages[1]).toEqual({ id: 'x', type: 'next', payload: { data: { s: 'from the second one' } } });
    expect(first.nextCalls).toBe(0);

    // The client completes the second one: its stream ends, and the server writes no complete of its own.
    ws.send('{"id":"x","type":"complete"}');
    await until(() => second.returned, signals);
    ws.send('{"type":"ping"}');
    await until(() => messages.length === 3, signals);
    expect(messages[2]).toEqual({ type: 'pong' });
    ws.close();
  });
});
