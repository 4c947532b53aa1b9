import type { Client } from 'graphql-ws';
import { request, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { AppendResult, NewEvent } from '../../src/events/index.js';
import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe, type Subscription } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { cursorNow, registerVerifications } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

// Two callbacks of one verification that arrive together (neither acknowledged before the other came) may be published
// in the reverse of their log order: each is published after its own 204, and the one stored first may be answered
// last (docs/decisions/061; across replicas, the bus delivers an insert that committed late after a later one). A
// stream of that one verification must still deliver both, each once: the lower one is no copy of anything it yielded.

const KEY = 'key-a';
const COMPLETED = /* GraphQL */ `
  subscription Completed($externalId: ID, $after: String) {
    verificationCompleted(externalId: $externalId, after: $after) {
      payload
    }
  }
`;

let t: TestGateway;
let sandbox: VerificationSandbox;
const clients: Client[] = [];

beforeAll(async () => {
  // The sandbox calls back only when a test says so: every callback below is the test's own.
  t = await startTestGateway({ GATEWAY_API_KEYS: KEY, SANDBOX_CALLBACK_DELAY_MS: '600000' });
  sandbox = t.gateway.sandbox.verification!;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  await t.close();
});

function callback(url: string, id: string, n: string): Promise<Dispatcher.ResponseData> {
  return request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ verificationExternalId: id, status: 'COMPLETED', n }),
  });
}

async function acknowledged(response: Promise<Dispatcher.ResponseData>): Promise<void> {
  const res = await response;
  await res.body.dump();
  expect(res.statusCode).toBe(204);
}

/**
 * A callback held between its event's commit and its 204 (so before its publish) until `release()`: the next append
 * of the log is run, then its answer waits. `stored` resolves with the held event's sequence number.
 */
function holdNextCallback(): { stored: Promise<number>; release: () => void } {
  const log = t.gateway.services.events.log;
  const original = log.append.bind(log);
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let stored!: (seq: number) => void;
  const storedSeq = new Promise<number>((resolve) => (stored = resolve));
  log.append = async (e: NewEvent, now?: number): Promise<AppendResult> => {
    log.append = original;
    const result = await original(e, now);
    stored(result.event.seq);
    await gate;
    return result;
  };
  return { stored: storedSeq, release };
}

function watch(variables: Record<string, unknown>): Subscription {
  const c = wsClient(t, { key: KEY });
  clients.push(c);
  return subscribe(c, COMPLETED, variables);
}

const ns = (sub: Subscription): string[] => sub.received.map((d) => d.verificationCompleted.payload.n as string);

describe('a stream of one verification, its callbacks published out of log order', () => {
  it('delivers both callbacks, each once, when the later-stored one is published first, then a later one after both', async () => {
    const [id] = [...(await registerVerifications(t, sandbox, KEY, 1))];
    const [externalId, url] = id!;
    const sub = watch({ externalId });
    // The stream is live (its read of the stored result is over) once a first callback reached it.
    await acknowledged(callback(url, externalId, 'marker'));
    await waitFor(() => sub.received.length === 1, 20_000, 'the marker callback');

    const held = holdNextCallback();
    const first = callback(url, externalId, 'x1');
    const firstSeq = await held.stored;
    await acknowledged(callback(url, externalId, 'x2'));
    await waitFor(() => ns(sub).includes('x2'), 20_000, 'the callback stored second, published first');
    // Stored after x1, so the newest of the verification in the log.
    expect((await t.gateway.services.events.log.latest('verification', externalId))!.seq).toBeGreaterThan(firstSeq);

    held.release();
    await acknowledged(first);
    // Acknowledged after both, so published after both: once it is in, whatever the stream yields of them is too.
    await acknowledged(callback(url, externalId, 'x3'));
    await waitFor(() => ns(sub).includes('x3'), 20_000, 'the callback after both');

    expect(sub.errors).toEqual([]);
    const got = ns(sub);
    expect(got[0]).toBe('marker');
    expect([...got.slice(1, 3)].sort()).toEqual(['x1', 'x2']);
    expect(got.slice(3)).toEqual(['x3']);
  });

  it('a stream resumed between the two publishes replays the later-stored one, then delivers the other live, each once', async () => {
    const [id] = [...(await registerVerifications(t, sandbox, KEY, 1))];
    const [externalId, url] = id!;
    const before = cursorNow(t);

    const held = holdNextCallback();
    const first = callback(url, externalId, 'y1');
    await held.stored;
    await acknowledged(callback(url, externalId, 'y2'));
    // Resumed now, the stream replays y2 (delivered here already) from the log; y1 is not delivered yet: it comes live.
    const sub = watch({ externalId, after: before });
    await waitFor(() => ns(sub).includes('y2'), 20_000, 'the replayed callback');

    held.release();
    await acknowledged(first);
    await acknowledged(callback(url, externalId, 'y3'));
    await waitFor(() => ns(sub).includes('y3'), 20_000, 'the callback after both');

    expect(sub.errors).toEqual([]);
    expect(ns(sub)).toEqual(['y2', 'y1', 'y3']);
  });
});
