// The database goes away between a run's two writes of its end: the row (SUCCEEDED, or FAILED on a refused step) is
// stored, its progress event is not. The query and a new subscriber read the row, so they see the end; a live
// subscriber and one that resumed from a cursor read only the events, and would wait for that end until their tokens
// expire. So the run announces the stored end again, and every subscriber gets it and completes. The event log refuses
// the write as a database that went away would (SERVICE_UNAVAILABLE), once, for the terminal state's event only. Real
// server on port 0, SQLite on disk, real graphql-ws clients; the run is held at the upstream while they subscribe.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { StoreUnavailableError } from '../../src/errors.js';
import { PROVISIONING_EVENT_KIND } from '../../src/provisioning/records.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { collect, wsClient, type Collected } from '../helpers/mobile-id.js';
import { ended } from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const start = gatewaysPerTest();
afterEach(() => vi.restoreAllMocks());

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;
const STATE = `query($id: ID!) { provisioning(id: $id) { state error { code } } }`;
const PROGRESS = `subscription($id: ID!, $after: String) {
  provisioningProgress(id: $id, after: $after) { state error { code } }
}`;

const input = (name: string) => ({
  project: { name },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.87.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
});

/** The first terminal state's event the gateway appends fails as if the database had gone away; the others are stored. */
function terminalEventFails(gw: TestGateway): { failed: () => boolean } {
  const events = gw.gateway.services.events;
  const ingest = events.ingest.bind(events);
  let failed = false;
  vi.spyOn(events, 'ingest').mockImplementation((e) => {
    const state = (e.payload as { state?: string }).state;
    if (failed || e.kind !== PROVISIONING_EVENT_KIND || (state !== 'SUCCEEDED' && state !== 'FAILED')) {
      return ingest(e);
    }
    failed = true;
    return Promise.reject(new StoreUnavailableError(new Error('the connection was closed')));
  });
  return { failed: () => failed };
}

/**
 * Starts a provisioning held at its first upstream request, subscribes to its progress live and resumed from a cursor
 * taken before it, then lets it run: the two streams, once the run is over.
 */
async function runWatched(gw: TestGateway): Promise<{ id: string; live: Collected; resumed: Collected }> {
  const { cursors, bus } = gw.gateway.services.events;
  const before = cursors.encode(bus.position(), Date.now());
  const held = gw.gateway.sandbox.cloud!.faults.hold();
  const first = await gw.graphql(PROVISION, { input: input(`end-unannounced-${randomUUID()}`), key: randomUUID() });
  expect(first.errors, JSON.stringify(first.errors)).toBeUndefined();
  const id = first.data!.provisionKafkaCluster.provisioning.id as string;
  await waitFor(() => held.arrived() >= 1, 20_000, 'the run at the upstream');
  const live = collect(wsClient(gw), PROGRESS, { id });
  const resumed = collect(wsClient(gw), PROGRESS, { id, after: before });
  await waitForSubscribers(gw, PROVISIONING_EVENT_KIND, id, 2);
  held.release();
  await gw.gateway.services.provisioning.idle();
  return { id, live, resumed };
}

describe("a provisioning's end stored without its event", () => {
  it('SUCCEEDED reaches the live and the resumed subscriber, which complete', async () => {
    const gw = await start({ IDEMPOTENCY_TAKEOVER: '1h' });
    const refused = terminalEventFails(gw);
    const { id, live, resumed } = await runWatched(gw);
    expect(refused.failed()).toBe(true);
    expect((await gw.graphql(STATE, { id })).data!.provisioning).toEqual({ state: 'SUCCEEDED', error: null });

    for (const [what, stream] of [
      ['live', live],
      ['resumed', resumed],
    ] as const) {
      await ended(stream.done, `the ${what} subscriber`);
      expect(stream.errors).toEqual([]);
      expect(stream.completed()).toBe(true);
      expect(stream.results.at(-1)!.data.provisioningProgress).toEqual({ state: 'SUCCEEDED', error: null });
    }
    // A subscriber that comes after the end reads it from the row, and completes.
    const late = collect(wsClient(gw), PROGRESS, { id });
    await ended(late.done, 'the late subscriber');
    expect(late.results.map((r) => r.data.provisioningProgress.state)).toEqual(['SUCCEEDED']);
  }, 60_000);

  it('FAILED on a refused step reaches the live and the resumed subscriber, which complete', async () => {
    const gw = await start({ IDEMPOTENCY_TAKEOVER: '1h', UPSTREAM_MAX_RETRIES: '0', UPSTREAM_CIRCUIT_BREAKER: 'off' });
    const sandbox = gw.gateway.sandbox.cloud!;
    // The network step is refused: the provisioning ends FAILED on it.
    sandbox.faults.enqueueFor((path, method) => method === 'POST' && path === '/ocs/v1/services', '503');
    const refused = terminalEventFails(gw);
    const { id, live, resumed } = await runWatched(gw);
    expect(refused.failed()).toBe(true);
    const stored = (await gw.graphql(STATE, { id })).data!.provisioning as { state: string; error: unknown };
    expect(stored.state).toBe('FAILED');

    for (const [what, stream] of [
      ['live', live],
      ['resumed', resumed],
    ] as const) {
      await ended(stream.done, `the ${what} subscriber`);
      expect(stream.errors).toEqual([]);
      expect(stream.completed()).toBe(true);
      expect(stream.results.at(-1)!.data.provisioningProgress).toEqual(stored);
    }
  }, 60_000);
});
