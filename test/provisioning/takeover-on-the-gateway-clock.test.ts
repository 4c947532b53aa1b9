// A composite provisioning keeps its time on the gateway's clock (which a test moves): its createdAt and updatedAt
// are written on it, and a call with its key judges on it whether a RUNNING provisioning is still alive (touched
// within IDEMPOTENCY_TAKEOVER) or was left by a replica that stopped, and is resumed. The gateway's clock is a month
// behind the wall's, so that a stamp or a judgement on the wall's would show.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const KEY = 'key-provisioning-clock';
const DAY_MS = 86_400_000;
const TAKEOVER_MS = 10_000;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state createdAt updatedAt } replayed }
}`;
const STATE = `query($id: ID!) { provisioning(id: $id) { state createdAt updatedAt } }`;

async function startOn(clock: { now: () => number }): Promise<TestGateway> {
  return start({ GATEWAY_API_KEYS: KEY, IDEMPOTENCY_TAKEOVER: `${TAKEOVER_MS}ms` }, { testing: { clock: clock.now } });
}

async function provision(t: TestGateway, input: unknown, key: string) {
  const res = await t.graphql(PROVISION, { input, key }, { key: KEY });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data!.provisionKafkaCluster as {
    provisioning: { id: string; state: string; createdAt: string; updatedAt: string };
    replayed: boolean;
  };
}

const input = (key: string) => ({
  project: { name: `clock-${key}` },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.82.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
});

describe('a composite provisioning on the gateway clock', () => {
  it('is created and updated at the gateway clock’s now', async () => {
    const clock = testClock(Date.now() - 30 * DAY_MS);
    const t = await startOn(clock);
    const key = randomUUID();
    const started = await provision(t, input(key), key);
    await t.gateway.services.provisioning.idle();
    const at = new Date(clock.now()).toISOString();
    expect(started.provisioning.createdAt).toBe(at);
    const done = (await t.graphql(STATE, { id: started.provisioning.id }, { key: KEY })).data!.provisioning;
    expect(done).toEqual({ state: 'SUCCEEDED', createdAt: at, updatedAt: at });
  });

  it('left RUNNING by a replica that stopped, is resumed by its key only once untouched for IDEMPOTENCY_TAKEOVER on the gateway clock', async () => {
    const clock = testClock(Date.now() - 30 * DAY_MS);
    const t = await startOn(clock);
    const key = randomUUID();
    const { id } = (await provision(t, input(key), key)).provisioning;
    await t.gateway.services.provisioning.idle();
    const created = t.gateway.sandbox.cloud!.resources().length;

    // The row as a replica that stopped after its run's last heartbeat left it (no run of this process holds it).
    await t.gateway.services.store.db
      .updateTable('provisionings')
      .set({ state: 'RUNNING', updated_at: clock.now() })
      .where('id', '=', id)
      .execute();

    clock.advance(TAKEOVER_MS - 1_000);
    const alive = await provision(t, input(key), key);
    expect(alive.replayed).toBe(true);
    expect(alive.provisioning.state).toBe('RUNNING');

    clock.advance(2_000);
    const resumed = await provision(t, input(key), key);
    expect(resumed.replayed).toBe(false);
    expect(resumed.provisioning.state).toBe('RUNNING');
    await t.gateway.services.provisioning.idle();
    const done = (await t.graphql(STATE, { id }, { key: KEY })).data!.provisioning;
    expect(done.state).toBe('SUCCEEDED');
    expect(done.updatedAt).toBe(new Date(clock.now()).toISOString());
    // Every step had finished: the resume replays them, and creates nothing.
    expect(t.gateway.sandbox.cloud!.resources()).toHaveLength(created);
  });

  it('while its step is at the upstream, its run’s heartbeat touches it at the gateway clock’s now', async () => {
    // The cloud upstream holds every request until the test lets it go; then it refuses them.
    let holding = true;
    const held: http.ServerResponse[] = [];
    const upstream = http.createServer((req, res) => {
      req.resume();
      if (holding) held.push(res);
      else res.writeHead(500, { 'content-type': 'application/json' }).end('{}');
    });
    const release = () => {
      holding = false;
      for (const r of held.splice(0)) r.writeHead(500, { 'content-type': 'application/json' }).end('{}');
    };
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    try {
      const clock = testClock(Date.now() - 30 * DAY_MS);
      const t = await start(
        {
          GATEWAY_API_KEYS: KEY,
          // A heartbeat every 100 ms of the wall's.
          IDEMPOTENCY_TAKEOVER: '300ms',
          CLOUD_API_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
          CLOUD_API_TOKEN: 'token',
          SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
          UPSTREAM_TIMEOUT: '10m',
        },
        { testing: { clock: clock.now } },
      );
      const key = randomUUID();
      const { id } = (await provision(t, input(key), key)).provisioning;
      await waitFor(() => held.length > 0, 20_000, 'the first step at the upstream');
      // Nothing but the heartbeat writes the row while the step is held.
      clock.advance(60_000);
      const touchedAt = async () =>
        Number(
          (
            await t.gateway.services.store.db
              .selectFrom('provisionings')
              .select('updated_at')
              .where('id', '=', id)
              .executeTakeFirstOrThrow()
          ).updated_at,
        );
      await waitFor(async () => (await touchedAt()) === clock.now(), 20_000, 'a heartbeat on the gateway clock');
      release();
      await t.gateway.services.provisioning.idle();
    } finally {
      release();
      await new Promise<void>((resolve) => upstream.close(() => resolve()));
    }
  });
});
