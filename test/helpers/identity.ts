import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from 'graphql-ws';
import { request } from 'undici';

import {
  IDENTIFICATIONS_PATH,
  startIdentificationSandbox,
  type IdentificationSandbox,
} from '../../src/sandbox/identification.js';
import { startTestGateway, type TestGateway } from './gateway.js';
import { subscribers, waitFor } from './wait.js';

export interface Subscription<T = any> {
  /** Every `data` received, in order. */
  readonly received: T[];
  readonly errors: unknown[];
  completed: boolean;
  stop(): void;
}

export function subscribe<T = any>(
  client: Client,
  query: string,
  variables: Record<string, unknown> = {},
): Subscription<T> {
  const sub: Subscription<T> = {
    received: [],
    errors: [],
    completed: false,
    stop: () => undefined,
  };
  sub.stop = client.subscribe<T>(
    { query, variables },
    {
      next: (value) => {
        if (value.errors) sub.errors.push(...value.errors);
        if (value.data) sub.received.push(value.data as T);
      },
      error: (error) => sub.errors.push(error),
      complete: () => {
        sub.completed = true;
      },
    },
  );
  return sub;
}

/** Resolves once the client's socket is connected and acknowledged. */
export function connected(client: Client): Promise<void> {
  return new Promise((resolve) => {
    const off = client.on('connected', () => {
      off();
      resolve();
    });
  });
}

/**
 * Resolves once the gateway's bus holds the test's subscriptions to events of `kind`: `keys` for those of one id, null
 * for those of every id (counted from none: the test file waits for the last test's to end). From then on an event
 * published reaches them live.
 */
export async function subscriptionsOnBus(t: TestGateway, kind: string, ...keys: (string | null)[]): Promise<void> {
  const want = new Map<string | null, number>();
  for (const k of keys) want.set(k, (want.get(k) ?? 0) + 1);
  await waitFor(
    () => [...want].every(([k, n]) => subscribers(t, kind, k) >= n),
    20_000,
    `subscriptions ${keys.join(', ')} on the bus`,
  );
}

/** Both identification environments, each its own sandbox accepting only its token, and a gateway in front of both. */
export interface TwoEnvironments {
  readonly gateway: TestGateway;
  readonly upstreams: Record<'PRODUCTION' | 'PRODLIKE', IdentificationSandbox>;
  /** The creations each sandbox was sent. */
  sent(upstream: IdentificationSandbox): number;
  close(): Promise<void>;
}

export async function twoIdentificationEnvironments(
  tokens: Record<'PRODUCTION' | 'PRODLIKE', string>,
  apiKeys: string,
): Promise<TwoEnvironments> {
  const upstreams = {
    PRODUCTION: await startIdentificationSandbox({ acceptedTokens: [tokens.PRODUCTION] }),
    PRODLIKE: await startIdentificationSandbox({ acceptedTokens: [tokens.PRODLIKE], environment: 'prodlike' }),
  };
  const gateway = await startTestGateway({
    GATEWAY_API_KEYS: apiKeys,
    SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
    IDENTIFICATION_API_URL: upstreams.PRODUCTION.url,
    IDENTIFICATION_PRODLIKE_API_URL: upstreams.PRODLIKE.url,
    IDENTIFICATION_API_TOKEN: tokens.PRODUCTION,
    IDENTIFICATION_PRODLIKE_API_TOKEN: tokens.PRODLIKE,
    SANDBOX_CALLBACK_DELAY_MS: '600000',
  });
  return {
    gateway,
    upstreams,
    sent: (u) => u.requests.filter((r) => r.method === 'POST' && r.path === IDENTIFICATIONS_PATH).length,
    async close() {
      await gateway.close();
      await Promise.all(Object.values(upstreams).map((u) => u.close()));
    },
  };
}

/** A callback as the upstream sends it (JSON, no other header): its status, its Retry-After and its parsed body. */
export async function postCallback(url: string, body: unknown) {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, retryAfter: res.headers['retry-after'], body: text ? JSON.parse(text) : null };
}

/**
 * A gateway whose verification interface is `answer` on loopback (the sandbox serves the other upstreams), for tests of
 * what a real service may do that the sandbox does not: call back before it answers, quote the callback address, …
 * `answer` is handed each registration's parsed body and the response to write.
 */
export async function gatewayOnVerificationStub(
  apiKey: string,
  answer: (sent: any, res: http.ServerResponse) => void,
): Promise<{ gw: TestGateway; close(): Promise<void> }> {
  const upstream = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => answer(JSON.parse(text), res));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const gw = await startTestGateway({
    GATEWAY_API_KEYS: apiKey,
    VERIFICATION_API_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    VERIFICATION_API_TOKEN: 'verification-token-1',
    SANDBOX_UPSTREAMS: 'cloud,identification,rfm,mobile-id',
  });
  return {
    gw,
    async close() {
      await gw.close();
      await new Promise((resolve) => upstream.close(resolve));
    },
  };
}
