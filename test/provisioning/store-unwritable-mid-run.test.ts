// A provisioning whose run cannot store a step's end (SQLite's file cannot be written while the step is at the
// upstream) does not stay RUNNING with nothing running behind it: once the disk is back its run writes the state it
// stopped in, FAILED with SERVICE_UNAVAILABLE on the step under way, so the provisioning says what happened and the
// app's next call with its key resumes it at once (docs/contract.md, SERVICE_UNAVAILABLE: a retry with the same key
// runs once). The step is sent again under its own key and the upstream replays it: every resource is made once. The
// fault is real: the process's file-size limit is set to 0, so every write of SQLite fails at the system call.
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
const STATE = `query($id: ID!) {
  provisioning(id: $id) { state error { code } steps { name state idempotencyKey error { code } } }
}`;

type State = {
  state: string;
  error: { code: string } | null;
  steps: Array<{ name: string; state: string; idempotencyKey: string | null; error: { code: string } | null }>;
};

describe.skipIf(unavailable !== null)(
  `a provisioning whose step's end cannot be stored${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    it('ends FAILED once the disk is back, and the next call with its key resumes it: each resource once', async () => {
      const gw = await start();
      const sandbox = gw.gateway.sandbox.cloud!;
      const name = `unwritable-${randomUUID()}`;
      const input = {
        project: { name },
        network: { title: 'net' },
        subnet: { title: 'sub', cidr: '10.84.0.0/24' },
        cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
      };
      const key = randomUUID();
      const read = async () => (await gw.graphql(STATE, { id })).data!.provisioning as State;
      // The project step is held at the upstream until the disk cannot be written.
      const held = sandbox.faults.hold();
      const first = await gw.graphql(PROVISION, { input, key });
      expect(first.errors, JSON.stringify(first.errors)).toBeUndefined();
      const id = first.data!.provisionKafkaCluster.provisioning.id as string;
      await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBe(1);
      fileSizeLimit(0);
      try {
        held.release();
        // The project is made upstream, and the run cannot store it: the write's failure is logged for the operator.
        await waitFor(
          () =>
            logLines<{ provisioning?: string; err?: { type?: string } }>(
              gw,
              (l) => l.provisioning === id && l.err?.type === 'StoreUnavailableError',
            ).length > 0,
          20_000,
          "the run's failed write in the log",
        );
      } finally {
        fileSizeLimit(null);
      }
      expect(sandbox.projects().filter((p) => p.name === name)).toHaveLength(1);

      const failed = await waitFor(async () => {
        const s = await read();
        return s.state !== 'RUNNING' && s;
      });
      expect(failed.state).toBe('FAILED');
      expect(failed.error).toEqual({ code: 'SERVICE_UNAVAILABLE' });
      expect(failed.steps[0]).toMatchObject({
        name: 'project',
        state: 'FAILED',
        error: { code: 'SERVICE_UNAVAILABLE' },
      });

      const resumed = await gw.graphql(PROVISION, { input, key });
      expect(resumed.data!.provisionKafkaCluster).toEqual({ provisioning: { id, state: 'RUNNING' }, replayed: false });
      await gw.gateway.services.provisioning.idle();
      const done = await read();
      expect(done.state).toBe('SUCCEEDED');
      // The project's key went upstream twice, and the upstream replayed it: one project, one of each resource.
      const projectKey = done.steps[0]!.idempotencyKey;
      const creations = sandbox.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'));
      expect(creations.filter((r) => r.headers['idempotency-key'] === projectKey)).toHaveLength(2);
      expect(sandbox.projects().filter((p) => p.name === name)).toHaveLength(1);
      expect(sandbox.resources()).toHaveLength(3);
    }, 60_000);
  },
);
