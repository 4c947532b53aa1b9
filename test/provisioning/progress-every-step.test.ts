// provisioningProgress(id) without a cursor promises the state now, then the state after every step (the schema's
// words): no state may be passed over, even when steps are stored while the subscriber connects. Here two states are
// stored and announced after the subscription read the provisioning's row and before its stream listens (the row's
// read is answered late, by the test); the stream must still deliver each of them, in order, then every later one.
// Read from the log, the newest of them alone came, and the state between them was skipped. Real server on port 0,
// SQLite on disk, a real graphql-ws client; the run is held at the cloud sandbox between its steps.
import { afterEach, describe, expect, it, vi } from 'vitest';

import { PROVISIONING_EVENT_KIND } from '../../src/provisioning/records.js';
import { gatewaysPerTest } from '../helpers/gateway.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { ended, kafkaInput, PROVISION_KAFKA } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'key-progress-every-step';
const start = gatewaysPerTest();
afterEach(() => vi.restoreAllMocks());

const PROGRESS = `subscription($id: ID!) { provisioningProgress(id: $id) { state steps { name state } } }`;

/** A state as one line: the provisioning's, then each step's. */
const line = (p: { state: string; steps: { name: string; state: string }[] }) =>
  `${p.state} ${p.steps.map((s) => `${s.name}:${s.state}`).join(' ')}`;

describe('provisioningProgress without a cursor', () => {
  it('delivers every state stored while the subscriber connects, not only the newest', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY });
    const faults = gw.gateway.sandbox.cloud!.faults;
    let held = faults.hold();
    try {
      const res = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput('every-step', '10.61.0.0/24') }, { key: KEY });
      expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
      const id = res.data!.provisionKafkaCluster.provisioning.id as string;
      // The run waits at its first step's upstream request: the row reads that step RUNNING.
      await waitFor(() => held.arrived() >= 1, 20_000, 'the run at its first step');

      // The subscription's read of the row is answered only once the test lets it go.
      const service = gw.gateway.services.provisioning;
      const get = service.get.bind(service);
      let read!: () => void;
      const rowRead = new Promise<void>((resolve) => (read = resolve));
      let answer!: () => void;
      const answered = new Promise<void>((resolve) => (answer = resolve));
      vi.spyOn(service, 'get').mockImplementationOnce(async (caller, pid) => {
        const row = await get(caller, pid);
        read();
        await answered;
        return row;
      });
      const sub = collect(wsClient(gw, { key: KEY }), PROGRESS, { id });
      await rowRead;

      // Meanwhile the first step is done and the second one starts: two states stored and announced, then the run
      // waits again, at the second step's request.
      const first = held;
      held = faults.hold();
      first.release();
      await waitFor(() => held.arrived() >= 1, 20_000, 'the run at its second step');
      answer();
      await waitFor(() => sub.results.length >= 2 || sub.errors.length > 0, 20_000, 'the first two states');
      held.release();
      await service.idle();
      await ended(sub.done, 'the stream, at SUCCEEDED');
      expect(sub.errors).toEqual([]);

      const delivered = sub.results.map((r) => line(r.data.provisioningProgress));
      const logged = (
        await gw.gateway.services.store.db
          .selectFrom('events')
          .select('payload')
          .where('kind', '=', PROVISIONING_EVENT_KIND)
          .where('key', '=', id)
          .orderBy('seq')
          .execute()
      ).map((row) => line(JSON.parse(row.payload)));
      // The first state is the row as read (the first step RUNNING), then each state logged after it, once, in order.
      expect(delivered[0]).toMatch(/^RUNNING project:RUNNING network:PENDING/);
      const from = logged.indexOf(delivered[0]!);
      expect(from).toBeGreaterThanOrEqual(0);
      expect(delivered).toEqual(logged.slice(from));
      expect(delivered[1]).toMatch(/^RUNNING project:DONE network:PENDING/);
      expect(delivered.at(-1)).toMatch(/^SUCCEEDED /);
    } finally {
      // Let go in any case: a held step would keep the gateway from closing.
      held.release();
    }
  });
});
