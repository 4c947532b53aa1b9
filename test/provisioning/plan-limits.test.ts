// A plan is bounded per app (docs/decisions/053): at most PROVISIONING_MAX_CONCURRENT_PLANS of one app are worked out at
// once, one more is refused at once with RATE_LIMITED and costs nothing, and another app's plan is not held up by it.
// The plans are held in flight by handing the event loop's turns over by hand (PlanTurns with a test-driven hand-over),
// so nothing here depends on timing.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { PlanTurns } from '../../src/provisioning/plan-turns.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY_A = 'plan-limit-app-a-key-0123456789';
const KEY_B = 'plan-limit-app-b-key-9876543210';
const PLAN = `query($input: ProvisionKafkaClusterInput!) { planKafkaCluster(input: $input) { valid steps { name } } }`;
const input = {
  project: { name: 'limited' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.80.0.0/24' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders' }],
  users: [{ name: 'svc', password: 'Limited-secret-1' }],
};

// Every slice ends at once (the clock never moves, the slice is 0 ms): a plan stops at its first step and goes on only
// when the test runs the hand-over it deferred.
const handOvers: Array<() => void> = [];
const turns = new PlanTurns({ sliceMs: 0, now: () => 0, defer: (handOver) => handOvers.push(handOver) });

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway(
    { GATEWAY_API_KEYS: `app-a:${KEY_A},app-b:${KEY_B}`, PROVISIONING_MAX_CONCURRENT_PLANS: '2' },
    { testing: { planTurns: turns } },
  );
});
afterAll(async () => {
  await gw?.close();
});

const metrics = async () => (await request(`${gw.url}/metrics`)).body.text();
const inFlight = async () => Number(/^gateway_plans_in_flight (\d+)$/m.exec(await metrics())?.[1] ?? 0);

/** Hands the turn over until every plan of `answers` has answered. */
async function runUntilAnswered(answers: Array<Promise<unknown>>): Promise<void> {
  let done = false;
  const all = Promise.all(answers).finally(() => {
    done = true;
  });
  while (!done) {
    const next = handOvers.shift();
    if (next) next();
    else await new Promise((resolve) => setImmediate(resolve));
  }
  await all;
}

describe('plans bounded per app', () => {
  it("refuses an app's plan past PROVISIONING_MAX_CONCURRENT_PLANS with RATE_LIMITED before any work, while another app's plan runs", async () => {
    const a1 = gw.graphql(PLAN, { input }, { key: KEY_A });
    const a2 = gw.graphql(PLAN, { input }, { key: KEY_A });
    await vi.waitFor(async () => expect(await inFlight()).toBe(2), { timeout: 30_000, interval: 20 });

    const stepsBefore = gw.gateway.services.plans.stepsRun;
    const a3 = await gw.graphql(PLAN, { input }, { key: KEY_A });
    expect(a3.errors?.[0]).toMatchObject({
      message: expect.stringMatching(/PROVISIONING_MAX_CONCURRENT_PLANS=2/),
      extensions: { code: 'RATE_LIMITED', limit: 'PROVISIONING_MAX_CONCURRENT_PLANS', max: 2, retryAfter: 1 },
    });
    expect(gw.gateway.services.plans.stepsRun).toBe(stepsBefore);
    expect(await metrics()).toContain('gateway_plans_refused_total{app="app-a"} 1');

    // Another app's plan is taken while app-a's two are in flight.
    const b1 = gw.graphql(PLAN, { input }, { key: KEY_B });
    await vi.waitFor(async () => expect(await inFlight()).toBe(3), { timeout: 30_000, interval: 20 });

    await runUntilAnswered([a1, a2, b1]);
    for (const res of await Promise.all([a1, a2, b1])) {
      expect(res.errors).toBeUndefined();
      expect(res.data!.planKafkaCluster.valid).toBe(true);
    }
    expect(await inFlight()).toBe(0);

    // Once they answered, app-a plans again.
    const again = gw.graphql(PLAN, { input }, { key: KEY_A });
    await runUntilAnswered([again]);
    expect((await again).data!.planKafkaCluster.valid).toBe(true);
    expect(await metrics()).not.toContain('gateway_plans_refused_total{app="app-b"}');
  });
});
