// A run that only paused (its process stalled past IDEMPOTENCY_TAKEOVER, its heartbeat with it) while a call with
// its key resumed the provisioning elsewhere writes nothing when it wakes: its writes are conditional on the revision
// it last wrote, so the first one finds the row taken over, and the run stops there (no further upstream call, no
// progress event), said once at warn. Two gateways of one process share the DATA_DIR (one SQLite database), each
// with its own cloud simulator; the gateway's testing clock, not the wall's, makes the first run's row stale.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { PROVISIONING_EVENT_KIND } from '../../src/provisioning/records.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const KEY = 'key-taken-over';
/** Long on the wall's clock (the first run's heartbeat never fires), passed at once on the testing clock. */
const TAKEOVER_MS = 600_000;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;
const input = {
  project: { name: 'taken-over' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.83.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders' }],
};

async function provision(t: TestGateway, key: string) {
  const res = await t.graphql(PROVISION, { input, key }, { key: KEY });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data!.provisionKafkaCluster as { provisioning: { id: string; state: string }; replayed: boolean };
}

interface Row {
  state: string;
  revision: number;
  steps: Array<{ name: string; state: string; resourceId: string | null }>;
}

async function row(t: TestGateway, id: string): Promise<Row> {
  const r = await t.gateway.services.store.db
    .selectFrom('provisionings')
    .select(['state', 'revision', 'steps'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return { state: r.state, revision: Number(r.revision), steps: JSON.parse(r.steps) as Row['steps'] };
}

/** The states the event log holds of the provisioning, in log order, as `revision:STATE`. */
async function logged(t: TestGateway, id: string): Promise<string[]> {
  const events = await t.gateway.services.store.db
    .selectFrom('events')
    .select('payload')
    .where('kind', '=', PROVISIONING_EVENT_KIND)
    .where('key', '=', id)
    .orderBy('seq')
    .execute();
  return events.map((e) => {
    const p = JSON.parse(e.payload) as { revision: number; state: string };
    return `${p.revision}:${p.state}`;
  });
}

describe('a provisioning run taken over while it paused', () => {
  it('writes nothing and calls the upstream no more once it wakes; the resumed run’s row and progress stand', async () => {
    const clock = testClock();
    const env = { GATEWAY_API_KEYS: KEY, IDEMPOTENCY_TAKEOVER: `${TAKEOVER_MS}ms`, UPSTREAM_TIMEOUT: '10m' };
    const a = await start(env, { testing: { clock: clock.now } });
    const b = await start({ ...env, DATA_DIR: a.dataDir }, { testing: { clock: clock.now } });
    const cloudA = a.gateway.sandbox.cloud!;
    const held = cloudA.faults.hold();
    // Let go in any case: a held step would keep the gateway from closing.
    try {
      const key = randomUUID();

      const first = await provision(a, key);
      expect(first.replayed).toBe(false);
      const { id } = first.provisioning;
      // The first run's first step is at A's upstream, and stays there: A's run is paused, its heartbeat silent.
      await waitFor(() => held.arrived() > 0, 20_000, 'the first step at the upstream');
      clock.advance(TAKEOVER_MS + 1_000);

      const resumed = await provision(b, key);
      expect(resumed.replayed).toBe(false);
      await b.gateway.services.provisioning.idle();
      const done = await row(b, id);
      expect(done.state).toBe('SUCCEEDED');
      const progress = await logged(b, id);
      expect(progress.at(-1)).toBe(`${done.revision}:SUCCEEDED`);
      const madeByA = cloudA.resources().length;

      // The first run wakes: its step's answer arrives.
      held.release();
      await a.gateway.services.provisioning.idle();

      expect(await row(a, id)).toEqual(done);
      expect(await logged(a, id)).toEqual(progress);
      // Nothing more was created by the run that woke: at most the step it had sent before it paused.
      expect(cloudA.resources().length).toBeLessThanOrEqual(madeByA + 1);
      const warned = a
        .logs()
        .split('\n')
        .filter((l) => l.includes('taken over'));
      expect(warned).toHaveLength(1);
      expect(JSON.parse(warned[0]!)).toMatchObject({ level: 40, provisioning: id });
      expect(a.logs()).not.toContain('"level":50');
    } finally {
      held.release();
    }
  });

  it('finds the takeover by its heartbeat while its step is at the upstream, and touches the resumed row no more', async () => {
    const clock = testClock();
    // A heartbeat every 100 ms of the wall's.
    const env = { GATEWAY_API_KEYS: KEY, IDEMPOTENCY_TAKEOVER: '300ms', UPSTREAM_TIMEOUT: '10m' };
    const a = await start(env, { testing: { clock: clock.now } });
    const b = await start({ ...env, DATA_DIR: a.dataDir }, { testing: { clock: clock.now } });
    const cloudA = a.gateway.sandbox.cloud!;
    const held = cloudA.faults.hold();
    // Let go in any case: a held step would keep the gateway from closing.
    try {
      const key = randomUUID();
      const { id } = (await provision(a, key)).provisioning;
      await waitFor(() => held.arrived() > 0, 20_000, 'the first step at the upstream');

      // A's heartbeat keeps touching the row at the testing clock's now: B's call resumes it once the clock has moved
      // past the takeover time since A's last touch (a call that finds it touched since answers it as running).
      await waitFor(
        async () => {
          clock.advance(1_000);
          return !(await provision(b, key)).replayed;
        },
        20_000,
        'a call on B that resumes the provisioning',
      );
      await b.gateway.services.provisioning.idle();
      const done = await row(b, id);
      expect(done.state).toBe('SUCCEEDED');
      const touchedAt = async () =>
        Number(
          (
            await a.gateway.services.store.db
              .selectFrom('provisionings')
              .select('updated_at')
              .where('id', '=', id)
              .executeTakeFirstOrThrow()
          ).updated_at,
        );
      const finishedAt = await touchedAt();
      clock.advance(60_000);

      // A's next heartbeat finds the row at B's revision: said once, and the row is left as B wrote it.
      await waitFor(() => a.logs().includes('taken over'), 20_000, 'the heartbeat finding the takeover');
      const madeByA = cloudA.resources().length;
      held.release();
      await a.gateway.services.provisioning.idle();
      expect(await row(a, id)).toEqual(done);
      expect(await touchedAt()).toBe(finishedAt);
      expect(cloudA.resources().length).toBeLessThanOrEqual(madeByA + 1);
      expect(
        a
          .logs()
          .split('\n')
          .filter((l) => l.includes('taken over')),
      ).toHaveLength(1);
    } finally {
      held.release();
    }
  });
});
