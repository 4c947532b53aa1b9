import type { Client } from 'graphql-ws';

import type { TestGateway } from './gateway.js';
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
    5_000,
    `subscriptions ${keys.join(', ')} on the bus`,
  );
}
