// The database goes away between a provisioning's two writes of its start: the row (the claim) is stored, its progress
// event is not. The row alone is the provisioning (a subscriber reads it first; a later event carries a later
// revision), so a claim whose row is stored is run: the provisioning never reads RUNNING with nothing running behind
// it: the call is answered RUNNING, the app's next call with its key, at once, is answered with that run (replayed),
// and the run makes every resource once. The same for a resume of a FAILED provisioning. The event log refuses the write as a database that went away would
// (SERVICE_UNAVAILABLE), once, for the provisioning's event only.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { StoreUnavailableError } from '../../src/errors.js';
import { PROVISIONING_EVENT_KIND } from '../../src/provisioning/records.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

const start = gatewaysPerTest();
afterEach(() => vi.restoreAllMocks());

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;
const STATE = `query($id: ID!) { provisioning(id: $id) { state steps { name state } } }`;

const input = (name: string) => ({
  project: { name },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.85.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
});

/** The next provisioning event the gateway appends fails as if the database had gone away; the others are stored. */
function nextProvisioningEventFails(gw: TestGateway): void {
  const events = gw.gateway.services.events;
  const ingest = events.ingest.bind(events);
  let failed = false;
  vi.spyOn(events, 'ingest').mockImplementation((e) => {
    if (failed || e.kind !== PROVISIONING_EVENT_KIND) return ingest(e);
    failed = true;
    return Promise.reject(new StoreUnavailableError(new Error('the connection was closed')));
  });
}

async function provision(gw: TestGateway, name: string, key: string) {
  const res = await gw.graphql(PROVISION, { input: input(name), key });
  return res.data?.provisionKafkaCluster as { provisioning: { id: string; state: string }; replayed: boolean } | null;
}

async function settled(gw: TestGateway, id: string): Promise<string> {
  await gw.gateway.services.provisioning.idle();
  return ((await gw.graphql(STATE, { id })).data!.provisioning as { state: string }).state;
}

describe("a provisioning's start stored without its event", () => {
  it('a new provisioning: it runs, and a call with its key at once is answered with that run', async () => {
    const gw = await start();
    const sandbox = gw.gateway.sandbox.cloud!;
    const name = `unannounced-${randomUUID()}`;
    const key = randomUUID();
    nextProvisioningEventFails(gw);
    const first = await provision(gw, name, key);
    expect(first).toEqual({ provisioning: { id: expect.any(String), state: 'RUNNING' }, replayed: false });
    const again = await provision(gw, name, key);
    expect(again).toEqual({ provisioning: { id: first!.provisioning.id, state: expect.any(String) }, replayed: true });
    expect(await settled(gw, first!.provisioning.id)).toBe('SUCCEEDED');
    expect(sandbox.projects().filter((p) => p.name === name)).toHaveLength(1);
    expect(sandbox.resources()).toHaveLength(3);
  });

  it('a resumed provisioning: it runs, and a call with its key at once is answered with that run', async () => {
    const gw = await start({ UPSTREAM_MAX_RETRIES: '0', UPSTREAM_CIRCUIT_BREAKER: 'off' });
    const sandbox = gw.gateway.sandbox.cloud!;
    const name = `unannounced-${randomUUID()}`;
    const key = randomUUID();
    // The network step fails once: the provisioning is FAILED, its project made.
    sandbox.faults.enqueueFor((path, method) => method === 'POST' && path === '/ocs/v1/services', '503');
    const first = await provision(gw, name, key);
    expect(await settled(gw, first!.provisioning.id)).toBe('FAILED');
    nextProvisioningEventFails(gw);
    const resumed = await provision(gw, name, key);
    expect(resumed).toEqual({ provisioning: { id: first!.provisioning.id, state: 'RUNNING' }, replayed: false });
    const again = await provision(gw, name, key);
    expect(again).toEqual({ provisioning: { id: first!.provisioning.id, state: expect.any(String) }, replayed: true });
    expect(await settled(gw, first!.provisioning.id)).toBe('SUCCEEDED');
    expect(sandbox.projects().filter((p) => p.name === name)).toHaveLength(1);
    expect(sandbox.resources()).toHaveLength(3);
  });
});
