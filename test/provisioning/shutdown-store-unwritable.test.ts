// A gateway shut down while a provisioning's run, stopped by a write the store refused, is trying again to store the
// state it stopped in (SQLite's file cannot be written): the shutdown does not wait for those attempts, which go on
// for IDEMPOTENCY_TAKEOVER (here an hour), far past the drain and the exit deadline. The run gives up at the shutdown,
// as a run stopped by it does: the row reads RUNNING and the next call with its key resumes it after the takeover
// time, as after a crash. The fault is real: the process's file-size limit is set to 0, so every write of SQLite fails
// at the system call.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { fileSizeLimit, fileSizeLimitUnavailable } from '../helpers/faults.js';
import { gatewaysPerTest, logLines } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const unavailable = fileSizeLimitUnavailable();

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;

describe.skipIf(unavailable !== null)(
  `a shutdown while a stopped run tries to store its state${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    it('ends without waiting out IDEMPOTENCY_TAKEOVER', async () => {
      const gw = await start({ IDEMPOTENCY_TAKEOVER: '1h' });
      const sandbox = gw.gateway.sandbox.cloud!;
      const input = {
        project: { name: `shutdown-unwritable-${randomUUID()}` },
        network: { title: 'net' },
        subnet: { title: 'sub', cidr: '10.87.0.0/24' },
        cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
      };
      const held = sandbox.faults.hold();
      const first = await gw.graphql(PROVISION, { input, key: randomUUID() });
      expect(first.errors, JSON.stringify(first.errors)).toBeUndefined();
      const id = first.data!.provisionKafkaCluster.provisioning.id as string;
      await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBe(1);
      fileSizeLimit(0);
      try {
        held.release();
        // The run's write of the project step's end failed: from here on it tries again to store the state it stopped in.
        await waitFor(
          () =>
            logLines<{ provisioning?: string; msg?: string }>(
              gw,
              (l) => l.provisioning === id && l.msg === 'provisioning run failed unexpectedly',
            ).length > 0,
          20_000,
          "the run's failed write in the log",
        );
        // Ends within the test's time (the drain is 20 s), not after the hour of the takeover time.
        await gw.gateway.close();
      } finally {
        fileSizeLimit(null);
      }
      expect(
        logLines<{ provisioning?: string; msg?: string }>(
          gw,
          (l) => l.provisioning === id && /could not be stored after its run stopped/.test(l.msg ?? ''),
        ),
      ).toHaveLength(1);
    }, 60_000);
  },
);
