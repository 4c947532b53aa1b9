import http from 'node:http';
import { createClient } from 'graphql-ws';
import { request } from 'undici';
import { expect } from 'vitest';
import WebSocket from 'ws';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import type { TestGateway } from './gateway.js';
import { mcpClient } from './mcp.js';
import { subscribers, waitFor, waitForSubscribers } from './wait.js';

const REGISTER = /* GraphQL */ `
  mutation Register($input: RegisterVerificationInput!) {
    registerVerification(input: $input) {
      verification {
        externalId
      }
    }
  }
`;

export const RESUME = /* GraphQL */ `
  subscription Resume($after: String) {
    verificationCompleted(after: $after) {
      externalId
      payload
    }
  }
`;

/** Registers `count` verifications with `key`; their callback addresses by external id. */
export async function registerVerifications(
  t: TestGateway,
  sandbox: VerificationSandbox,
  key: string,
  count: number,
): Promise<Map<string, string>> {
  const urls = new Map<string, string>();
  for (let i = 0; i < count; i++) {
    const res = await t.graphql(
      REGISTER,
      { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' } } },
      { key },
    );
    if (res.errors) throw new Error(JSON.stringify(res.errors));
    const id = res.data!.registerVerification.verification.externalId as string;
    const v = sandbox.verifications().find((x) => x.externalId === id);
    urls.set(id, v!.callbackUrl!);
  }
  return urls;
}

/** Posts a completion callback whose body holds `n` (each distinct body is a new event), until it is acknowledged. */
export async function postCompletion(url: string, externalId: string, n: string, pad?: string): Promise<void> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ verificationExternalId: externalId, status: 'COMPLETED', n, ...(pad ? { pad } : {}) }),
  });
  await res.body.text();
  if (res.statusCode >= 300) throw new Error(`callback answered ${res.statusCode}`);
}

/**
 * Waits until every one of these replicas has delivered every event in the log: an event acknowledged at one replica
 * reaches the others through PostgreSQL's NOTIFY, and reaches the one that took it once everything acknowledged
 * before it did (docs/decisions/061), so a moment after its acknowledgement it may still be on its way. A cursor
 * taken after this (cursorNow, or an EventReader's "now") is past every event posted so far.
 */
export async function deliveredEverywhere(...replicas: TestGateway[]): Promise<void> {
  const rows = await replicas[0]!.gateway.services.store.db.selectFrom('events').select('seq').execute();
  const seqs = rows.map((row) => Number(row.seq));
  const everywhere = () =>
    replicas.every((t) => {
      const position = t.gateway.services.events.bus.position();
      return seqs.every((seq) => position.has(seq));
    });
  await waitFor(everywhere, 20_000, 'every event posted so far delivered on every replica');
}

/**
 * A cursor of where the buses of these replicas stand now, together: a stream resumed from it gets every event
 * acknowledged later (and none before, even one the other replica has not delivered yet), with no race.
 */
export function cursorNow(...replicas: TestGateway[]): string {
  const positions = replicas.map((t) => t.gateway.services.events.bus.position());
  return replicas[0]!.gateway.services.events.cursors.encode(
    positions.reduce((a, b) => a.union(b)),
    Date.now(),
  );
}

export interface Resumed {
  /** Every event received: the `n` of its body and its cursor. */
  events: { n: string; cursor: string }[];
  errors: any[];
  close(): Promise<void>;
}

/** A graphql-ws client (no retries) subscribed to every verification result of `key` after `cursor`. */
export async function resumeWs(t: TestGateway, key: string, cursor: string | null): Promise<Resumed> {
  const client = createClient({
    url: `${t.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    connectionParams: { authorization: `Bearer ${key}` },
  });
  const out: Resumed = {
    events: [],
    errors: [],
    close: async () => {
      await client.dispose();
    },
  };
  client.subscribe(
    { query: RESUME, variables: cursor ? { after: cursor } : {} },
    {
      next: (value) => {
        if (value.errors) out.errors.push(...value.errors);
        if (value.data)
          out.events.push({
            n: (value.data as any).verificationCompleted.payload.n,
            cursor: (value.extensions as { cursor: string }).cursor,
          });
      },
      error: (err) => out.errors.push(...(Array.isArray(err) ? err : [err])),
      complete: () => undefined,
    },
  );
  return out;
}

/** The cursor MCP `wait_for_events` hands out with nothing to read resumes: a second wait on it is not refused. */
export async function mcpCursorResumes(t: TestGateway, key: string): Promise<void> {
  const mcp = await mcpClient(t, { key });
  try {
    const now = await mcp.call('wait_for_events', { timeoutSeconds: 0 });
    expect(now.isError).toBeFalsy();
    const cursor = (now.structuredContent as { cursor: string }).cursor;
    const again = await mcp.call('wait_for_events', { cursor, timeoutSeconds: 0 });
    expect(again.structuredContent).not.toHaveProperty('errors');
    expect(again.isError).toBeFalsy();
  } finally {
    await mcp.close();
  }
}

/**
 * A live event's cursor resumes: `key` subscribes over graphql-ws and receives the completion `first` posted on
 * `callback`, then resumes from that event's cursor and receives `next`, with no error (no `expired` refusal).
 */
export async function resumesFromALiveCursor(
  t: TestGateway,
  key: string,
  callback: { url: string; id: string },
  first: string,
  next: string,
): Promise<void> {
  const live = await resumeWs(t, key, null);
  await waitForSubscribers(t, VERIFICATION_EVENT_KIND);
  await postCompletion(callback.url, callback.id, first);
  await waitFor(() => live.events.length === 1, 20_000, 'the event, live');
  await live.close();
  const sub = await resumeWs(t, key, live.events[0]!.cursor);
  await waitForSubscribers(t, VERIFICATION_EVENT_KIND);
  await postCompletion(callback.url, callback.id, next);
  await waitFor(() => sub.events.length === 1 || sub.errors.length > 0, 20_000, 'the next event, or a refusal');
  await sub.close();
  expect(sub.errors).toEqual([]);
  expect(sub.events.map((e) => e.n)).toEqual([next]);
}

/** The number of live listeners on `t`'s bus for every key of `kind`. */
export function wildcardListeners(t: TestGateway, kind: string): number {
  return subscribers(t, kind, null);
}

/** Waits until no stream listens for every key of `kind` on `t` (earlier clients are gone), so that the next one is known to be listening once one is. */
export async function noWildcardListener(t: TestGateway, kind: string): Promise<void> {
  await waitFor(() => wildcardListeners(t, kind) === 0, 20_000, 'earlier subscribers gone');
}

/** The two streams that end, resumed with `after` over graphql-ws (test/events/resume-ended-streams*.test.ts). */
export const MOBILE_ID_AFTER = /* GraphQL */ `
  subscription ($id: String!, $after: String) {
    mobileIdAuthentication(authReqId: $id, after: $after) {
      __typename
      ... on MobileIdAuthenticationFailed {
        authReqId
        reason
      }
    }
  }
`;
export const PROGRESS_AFTER = /* GraphQL */ `
  subscription ($id: ID!, $after: String) {
    provisioningProgress(id: $id, after: $after) {
      state
      steps {
        name
        state
      }
    }
  }
`;
// What an EventSource sends again: the same operations without `after`; the cursor travels as Last-Event-ID.
export const MOBILE_ID_SSE = /* GraphQL */ `
  subscription ($id: String!) {
    mobileIdAuthentication(authReqId: $id) {
      __typename
      ... on MobileIdAuthenticationFailed {
        authReqId
        reason
      }
    }
  }
`;
export const PROGRESS_SSE = /* GraphQL */ `
  subscription ($id: ID!) {
    provisioningProgress(id: $id) {
      state
      steps {
        name
        state
      }
    }
  }
`;
export const PROVISION_KAFKA = /* GraphQL */ `
  mutation ($input: ProvisionKafkaClusterInput!) {
    provisionKafkaCluster(input: $input) {
      provisioning {
        id
        state
      }
    }
  }
`;

/** A Kafka provisioning's input, its project named `name`, its subnet `cidr`. */
export const kafkaInput = (name: string, cidr: string) => ({
  project: { name },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr },
  ipAddress: { title: 'public' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders', replicationFactor: 3 }],
  users: [{ name: 'svc', password: 'Pr0vision-secret' }],
});

/** A bounded wait on a stream's end: the test fails (rather than hangs) when it does not complete within `ms`. */
export async function ended(done: Promise<unknown>, what: string, ms = 20_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: the stream did not complete within ${ms / 1000} s`)), ms);
  });
  try {
    await Promise.race([done, limit]);
  } finally {
    clearTimeout(timer);
  }
}

export interface SseEvent {
  event: string;
  id: string | undefined;
  data: any;
}

/**
 * An SSE stream's reader: feed it the text as it arrives, in chunks cut anywhere; it calls `onEvent` with each whole
 * event that names its type (comments and keep-alives are skipped), its `data` parsed as JSON.
 */
export function sseEvents(onEvent: (e: SseEvent) => void): (chunk: string) => void {
  let text = '';
  return (chunk) => {
    text += chunk;
    let end: number;
    while ((end = text.indexOf('\n\n')) !== -1) {
      const lines = text.slice(0, end).split('\n');
      text = text.slice(end + 2);
      const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
      if (event === undefined) continue;
      const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
      const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
      onEvent({ event, id, data: data ? JSON.parse(data) : null });
    }
  };
}

/**
 * graphql-sse's single-connection mode on `t` with app key `key`: a stream reserved (PUT: 201 and its token), an
 * operation of `subscription` added to it as `op1` (POST: 202), and its GET, answered once the gateway answers it.
 */
export function reservedSse(t: TestGateway, key: string, subscription: string) {
  const auth = { authorization: `Bearer ${key}` };
  const TOKEN = 'x-graphql-event-stream-token';
  return {
    async reserve(): Promise<string> {
      const put = await request(`${t.url}/graphql/stream`, {
        method: 'PUT',
        headers: { ...auth, accept: 'text/plain' },
      });
      expect(put.statusCode).toBe(201);
      return put.body.text();
    },
    async add(token: string): Promise<void> {
      const res = await request(`${t.url}/graphql/stream`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', accept: 'application/json', [TOKEN]: token },
        body: JSON.stringify({ query: subscription, extensions: { operationId: 'op1' } }),
      });
      await res.body.text();
      expect(res.statusCode).toBe(202);
    },
    get(token: string): Promise<http.IncomingMessage> {
      return new Promise((resolve, reject) => {
        const req = http.request(`${t.url}/graphql/stream`, {
          agent: false,
          headers: { ...auth, accept: 'text/event-stream', [TOKEN]: token },
        });
        req.on('response', resolve);
        req.on('error', reject);
        req.end();
      });
    },
  };
}

/** The `n` of each `verificationCompleted` `next` event a stream receives, read as it comes (postCompletion's). */
export function completionsOn(res: http.IncomingMessage): string[] {
  const received: string[] = [];
  res.setEncoding('utf8');
  res.on(
    'data',
    sseEvents((e) => {
      if (e.event === 'next') received.push(e.data.payload.data.verificationCompleted.payload.n);
    }),
  );
  return received;
}

/** How many subscriptions `t` has closed as slow consumers (`gateway_subscriptions_closed_total`), undefined for none. */
export async function closedAsSlow(t: TestGateway): Promise<string | undefined> {
  return /gateway_subscriptions_closed_total\{reason="slow_consumer"\} (\d+)/.exec(
    await (await request(`${t.url}/metrics`)).body.text(),
  )?.[1];
}

/**
 * A graphql-ws subscriber of `verificationCompleted` on `t` (with `key`, its subscription named `subscription`) that
 * stops reading: large completions are posted on `url` for `externalId` until the gateway counts a slow consumer, then
 * the socket reads again until it is closed. What it received (`ns`, `cursors`), what was posted, and the close.
 */
export async function slowWsConsumer(
  t: TestGateway,
  key: string,
  url: string,
  externalId: string,
  subscription: string,
): Promise<{ ns: string[]; cursors: string[]; posted: string[]; closed: { code: number; reason: string } }> {
  const socket = new WebSocket(`${t.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  const cursors: string[] = [];
  const ns: string[] = [];
  let closed: { code: number; reason: string } | undefined;
  socket.on('message', (data) => {
    const m = JSON.parse(String(data));
    if (m.type === 'connection_ack')
      socket.send(
        JSON.stringify({
          id: subscription,
          type: 'subscribe',
          payload: { query: 'subscription { verificationCompleted { payload } }' },
        }),
      );
    if (m.type === 'next') {
      cursors.push(m.payload.extensions.cursor);
      ns.push(m.payload.data.verificationCompleted.payload.n);
    }
  });
  socket.on('close', (code, reason) => (closed = { code, reason: String(reason) }));
  await new Promise((resolve) => socket.once('open', resolve));
  socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${key}` } }));
  await waitForSubscribers(t, 'verification');
  // The client stops reading; large events fill the kernel's buffers, then the gateway's.
  socket.pause();
  const posted: string[] = [];
  const pad = 'x'.repeat(200_000);
  for (let i = 0; i < 200 && (await closedAsSlow(t)) === undefined; i++) {
    posted.push(`slow-${i}`);
    await postCompletion(url, externalId, `slow-${i}`, pad);
  }
  expect(await closedAsSlow(t)).toBe('1');
  socket.resume();
  await waitFor(() => closed, 60_000, 'the close');
  return { ns, cursors, posted, closed: closed! };
}

/**
 * One operation over a distinct SSE stream on `t` with `key`, and Last-Event-ID when given: its events as they arrive
 * (`nexts`: the `next` ones), and its end.
 */
export async function sseStream(
  t: TestGateway,
  key: string,
  query: string,
  variables: Record<string, unknown>,
  lastEventId?: string,
): Promise<{ events: SseEvent[]; nexts: () => SseEvent[]; done: Promise<void> }> {
  const res = await request(`${t.url}/graphql/stream`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'text/event-stream',
      ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
    },
    body: JSON.stringify({ query, variables }),
  });
  if (res.statusCode !== 200) throw new Error(`the SSE stream answered ${res.statusCode}`);
  const events: SseEvent[] = [];
  const read = sseEvents((e) => events.push(e));
  const done = (async () => {
    for await (const chunk of res.body) read(chunk.toString());
  })();
  return { events, nexts: () => events.filter((e) => e.event === 'next'), done };
}
