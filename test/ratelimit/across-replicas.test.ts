import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';
import { APP_A, APP_B, CREATE_PROJECT, post, projectCreationsUpstream, READ_PROJECTS } from '../helpers/ratelimit.js';

describe('per-app rate limits across replicas on PostgreSQL', () => {
  let replicas: Replicas | undefined;
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    replicas = await startReplicas('ratelimits', {
      GATEWAY_API_KEYS: `${APP_A},${APP_B}`,
      RATE_LIMIT_CREATIONS: '3/1h',
      RATE_LIMIT_READS: '4/1h',
    });
    ({ a, b } = replicas);
  }, 120_000);
  afterAll(() => replicas?.close());

  const upstream = () => projectCreationsUpstream(a) + projectCreationsUpstream(b);

  it('an app spends one creation budget whichever replica it calls, and refused creations reach no upstream', async () => {
    expect((await post(a, APP_A, CREATE_PROJECT, { name: 'r1' })).status).toBe(200);
    expect((await post(b, APP_A, CREATE_PROJECT, { name: 'r2' })).status).toBe(200);
    expect((await post(a, APP_A, CREATE_PROJECT, { name: 'r3' })).status).toBe(200);
    expect(upstream()).toBe(3);
    for (const gw of [b, a, b]) {
      const refused = await post(gw, APP_A, CREATE_PROJECT, { name: 'over' });
      expect(refused.status).toBe(429);
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(refused.body.errors![0]!.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'creations' });
    }
    expect(upstream()).toBe(3);
  });

  it('another app keeps its own budget on both replicas', async () => {
    expect((await post(b, APP_B, CREATE_PROJECT, { name: 'b1' })).status).toBe(200);
    expect((await post(a, APP_B, CREATE_PROJECT, { name: 'b2' })).status).toBe(200);
    expect(upstream()).toBe(5);
  });

  it('reads have their own budget, shared across replicas too', async () => {
    // APP_A has spent its creations above; its reads are untouched.
    expect((await post(a, APP_A, READ_PROJECTS)).status).toBe(200);
    expect((await post(b, APP_A, READ_PROJECTS)).status).toBe(200);
    expect((await post(a, APP_A, READ_PROJECTS)).status).toBe(200);
    expect((await post(b, APP_A, READ_PROJECTS)).status).toBe(200);
    const refused = await post(a, APP_A, READ_PROJECTS);
    expect(refused.status).toBe(429);
    expect(refused.body.errors![0]!.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'reads' });
  });

  it('the counters live in the shared database, under the hashed key only', async () => {
    const { rows } = await a.gateway.services.store.db
      .selectFrom('rate_limits' as never)
      .selectAll()
      .execute()
      .then((r) => ({ rows: r as Array<{ key: string; points: number }> }));
    const keys = rows.map((r) => r.key).sort();
    expect(keys.length).toBeGreaterThanOrEqual(3);
    for (const k of keys) expect(k).toMatch(/^(creations|reads):key:[0-9a-f]{16}$/);
    expect(JSON.stringify(rows)).not.toContain(APP_A);
    expect(JSON.stringify(rows)).not.toContain(APP_B);
  });
});
