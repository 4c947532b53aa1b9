// A plan is charged by its size (docs/decisions/053): one read point (RATE_LIMIT_READS) per 100 fields of its input,
// rounded up, of which the query's own point is the first; a plan the app's budget cannot cover is refused whole with
// RATE_LIMITED before any work.
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

const start = gatewaysPerTest();
const KEY = 'plan-charge-app-key-0123456789';
const PLAN = `query($input: ProvisionKafkaClusterInput!) { planKafkaCluster(input: $input) { valid } }`;

/** `users` users with `acls` ACLs each: every ACL is three fields (pattern, patternType, operation). */
const input = (users: number, acls: number) => ({
  project: { name: 'charged' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.81.0.0/24' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders' }],
  users: Array.from({ length: users }, (_, i) => ({
    name: `svc-${i}`,
    password: 'Charged-secret-1',
    acls: Array.from({ length: acls }, (_, j) => ({ pattern: `t${j}`, patternType: 'literal', operation: 'rw' })),
  })),
});

async function readPoints(gw: TestGateway): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const m = /gateway_rate_limit_points_total\{app="[^"]+",bucket="reads",outcome="allowed"\} (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

async function pointsOf(gw: TestGateway, given: unknown): Promise<number> {
  const before = await readPoints(gw);
  const res = await gw.graphql(PLAN, { input: given }, { key: KEY });
  expect(res.errors).toBeUndefined();
  expect(res.data!.planKafkaCluster.valid).toBe(true);
  return (await readPoints(gw)) - before;
}

describe('plans are charged by their size', () => {
  it('charges a plan one read point per 100 fields of its input: 100 more ACLs (300 fields) cost 3 more points, a small plan only its query point', async () => {
    const gw = await start({ GATEWAY_API_KEYS: `charged:${KEY}`, RATE_LIMIT_READS: '100000/1h' });
    expect(await pointsOf(gw, input(1, 1))).toBe(1);
    const smaller = await pointsOf(gw, input(4, 25));
    const larger = await pointsOf(gw, input(4, 50));
    expect(smaller).toBeGreaterThan(3);
    expect(larger - smaller).toBe(3);
  });

  it("refuses a plan its app's read budget cannot cover with RATE_LIMITED (bucket reads), before any work", async () => {
    const gw = await start({ GATEWAY_API_KEYS: `charged:${KEY}`, RATE_LIMIT_READS: '5/1h' });
    const planner = gw.gateway.services.plans;
    const before = planner.stepsRun;
    // 4 users with 50 ACLs: over 600 fields (7 points), where the budget is 5.
    const res = await gw.graphql(PLAN, { input: input(4, 50) }, { key: KEY });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'reads' });
    expect(planner.stepsRun).toBe(before);
    expect(planner.inputNodes).toBe(0);
  });
});
