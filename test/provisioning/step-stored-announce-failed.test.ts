// The database goes away between a run's two writes of one step's state: the row (the step RUNNING, the next revision)
// is stored, its progress event is not. The run stops there, as for any write the store refused, and writes the state
// it stopped in on the row as it is: FAILED with SERVICE_UNAVAILABLE on the step under way, which the app's next call
// with its key resumes at once. It must not take its own stored revision for another call's takeover, stop writing,
// and leave the provisioning RUNNING with nothing running behind it until IDEMPOTENCY_TAKEOVER has passed. The event
// log refuses the write as a database that went away would (SERVICE_UNAVAILABLE), once, for the step's event only.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { StoreUnavailableError } from '../../src/errors.js';
import { PROVISIONING_EVENT_KIND } from '../../src/provisioning/records.js';
import { gatewaysPerTest, logLines } from '../helpers/gateway.js';

const start = gatewaysPerTest();
afterEach(() => vi.restoreAllMocks());

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;
const STATE = `query($id: ID!) {
  provisioning(id: $id) { state error { code } steps { name state error { code } } }
}`;

type State = {
  state: string;
  error: { code: string } | null;
  steps: Array<{ name: string; state: string; error: { code: string } | null }>;
};

describe("a provisioning step's state stored without its event", () => {
  it('ends FAILED on that step, not RUNNING as if taken over, and the next call with its key resumes it', async () => {
    // A takeover time no test waits out: only the run's own write may end the provisioning.
    const gw = await start({ IDEMPOTENCY_TAKEOVER: '1h' });
    const sandbox = gw.gateway.sandbox.cloud!;
    const name = `step-unannounced-${randomUUID()}`;
    const input = {
      project: { name },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.86.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    };
    const key = randomUUID();
    // The claim's event is stored; the next one (the first step RUNNING) fails after its row was written.
    const events = gw.gateway.services.events;
    const ingest = events.ingest.bind(events);
    let seen = 0;
    vi.spyOn(events, 'ingest').mockImplementation((e) => {
      if (e.kind !== PROVISIONING_EVENT_KIND || ++seen !== 2) return ingest(e);
      return Promise.reject(new StoreUnavailableError(new Error('the connection was closed')));
    });

    const first = await gw.graphql(PROVISION, { input, key });
    expect(first.errors, JSON.stringify(first.errors)).toBeUndefined();
    const id = first.data!.provisionKafkaCluster.provisioning.id as string;
    await gw.gateway.services.provisioning.idle();
    expect(seen).toBeGreaterThanOrEqual(2);

    const stopped = (await gw.graphql(STATE, { id })).data!.provisioning as State;
    expect(stopped.state).toBe('FAILED');
    expect(stopped.error).toEqual({ code: 'SERVICE_UNAVAILABLE' });
    expect(stopped.steps[0]).toMatchObject({
      name: 'project',
      state: 'FAILED',
      error: { code: 'SERVICE_UNAVAILABLE' },
    });
    // Nothing took it over: the log says no such thing.
    expect(logLines<{ msg?: string }>(gw, (l) => /taken over/.test(l.msg ?? ''))).toEqual([]);

    const resumed = await gw.graphql(PROVISION, { input, key });
    expect(resumed.data!.provisionKafkaCluster).toEqual({ provisioning: { id, state: 'RUNNING' }, replayed: false });
    await gw.gateway.services.provisioning.idle();
    const done = (await gw.graphql(STATE, { id })).data!.provisioning as State;
    expect(done.state).toBe('SUCCEEDED');
    expect(sandbox.projects().filter((p) => p.name === name)).toHaveLength(1);
    expect(sandbox.resources()).toHaveLength(3);
  }, 60_000);
});
