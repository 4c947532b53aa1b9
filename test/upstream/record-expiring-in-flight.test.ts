import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { gatewaysPerTest } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * IDEMPOTENCY_RETENTION counts from a record's claim, but a call may still run when it has passed (a slow upstream,
 * a short retention). A record whose call is alive is not expired: another call with its key neither runs beside it
 * nor claims it, the purge job leaves it, and its answer is stored and replayed. The call is held upstream and the
 * testing clock moved past the retention; nothing waits for a duration.
 */

const gateway = gatewaysPerTest();

const HOUR_MS = 3_600_000;

const projectCalls = (gw: Awaited<ReturnType<typeof gateway>>) =>
  gw.gateway.sandbox.cloud!.requests.filter((r) => r.path === '/apis/projects/public/v4/projects');

describe('an idempotency record whose retention passes while its call still runs', () => {
  async function heldPastRetention() {
    const clock = { now: Date.now() };
    const runs = new Map<string, () => void>();
    // A lease of an hour: no renewal fires during the test; only the retention (1 s) passes on the testing clock.
    const gw = await gateway(
      {
        IDEMPOTENCY_RETENTION: '1s',
        IDEMPOTENCY_TAKEOVER: `${HOUR_MS}ms`,
        IDEMPOTENCY_WAIT: '100ms',
        UPSTREAM_MAX_RETRIES: '0',
      },
      {
        testing: {
          clock: () => clock.now,
          scheduleJob: (name, run) => {
            runs.set(name, run);
            return () => undefined;
          },
        },
      },
    );
    const key = randomUUID();
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    const a = gw.graphql(M.project, { input: { name: 'slow' }, key });
    await waitFor(() => held.arrived() === 1, 20_000, 'call A upstream');
    clock.now += 2_000;
    return { gw, key, held, a, runs };
  }

  it('is not claimed by a call with the same key and input: it waits, and the upstream sees one call', async () => {
    const { gw, key, held, a } = await heldPastRetention();
    const b = await gw.graphql(M.project, { input: { name: 'slow' }, key });
    held.release();
    expect(b.errors?.[0]?.extensions?.code, 'B did not run beside A').toBe('IDEMPOTENCY_KEY_IN_USE');
    const done = await a;
    expect(done.data!.createProject).toMatchObject({ idempotencyKey: key, replayed: false });
    expect(projectCalls(gw)).toHaveLength(1);
    expect(gw.logs()).not.toContain('another call took its key over');
  });

  it('is not claimed by a call with the same key and another input', async () => {
    const { gw, key, held, a } = await heldPastRetention();
    const b = await gw.graphql(M.project, { input: { name: 'other' }, key });
    held.release();
    expect(b.errors?.[0]?.extensions?.code, 'B was not sent under the key A is using').toBe('IDEMPOTENCY_KEY_REUSED');
    expect((await a).errors).toBeUndefined();
    expect(projectCalls(gw)).toHaveLength(1);
  });

  it('is left by the purge job: its answer is stored, and the same request replays it', async () => {
    const { gw, key, held, a, runs } = await heldPastRetention();
    const db = gw.gateway.services.store.db;
    const records = (k: string) => db.selectFrom('idempotency_records').select('key').where('key', '=', k).execute();
    // A record whose retention passed with no call running: the purge has run once it is gone.
    const idle = randomUUID();
    await db
      .insertInto('idempotency_records')
      .values({
        scope: 'sentinel',
        key: idle,
        operation: 'createProject',
        fingerprint: 'x',
        state: 'done',
        response: null,
        lease_until: 0,
        created_at: 0,
        expires_at: 1,
      })
      .execute();
    runs.get('purge idempotency records')!();
    await waitFor(async () => (await records(idle)).length === 0, 20_000, 'the purge job');
    held.release();
    const done = await a;
    expect(done.errors).toBeUndefined();
    expect(gw.logs()).not.toContain('another call took its key over');
    const again = await gw.graphql(M.project, { input: { name: 'slow' }, key });
    expect(again.data!.createProject).toEqual({ ...done.data!.createProject, replayed: true });
    expect(projectCalls(gw)).toHaveLength(1);
  });

  it('keeps an unreadable answer parked after it: the retry reads it again and sends nothing', async () => {
    const { gw, key, held, a } = await heldPastRetention();
    gw.gateway.sandbox.cloud!.faults.enqueue('ok-no-id');
    held.release();
    expect((await a).errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    const again = await gw.graphql(M.project, { input: { name: 'slow' }, key });
    // The kept answer names no id: read again, it is the same UPSTREAM_ANSWER_INCOMPLETE.
    expect(again.errors?.[0]?.extensions?.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    expect(projectCalls(gw), 'the retry read the kept answer, it did not send the request again').toHaveLength(1);
  });

  it('keeps the key bound to its request after it failed as it may have reached the upstream', async () => {
    const { gw, key, held, a } = await heldPastRetention();
    // Created upstream, and the answer lost: UPSTREAM_UNAVAILABLE, the key stays with this request.
    gw.gateway.sandbox.cloud!.faults.enqueue('reset-after');
    held.release();
    expect((await a).errors![0]!.extensions!.code).toBe('UPSTREAM_UNAVAILABLE');
    const other = await gw.graphql(M.project, { input: { name: 'other' }, key });
    expect(other.errors?.[0]?.extensions?.code, 'never sent under a key the upstream may have used').toBe(
      'IDEMPOTENCY_KEY_REUSED',
    );
    expect(projectCalls(gw)).toHaveLength(1);
    const again = await gw.graphql(M.project, { input: { name: 'slow' }, key });
    expect(again.data!.createProject).toMatchObject({ idempotencyKey: key, replayed: false });
    expect(gw.gateway.sandbox.cloud!.projects()).toHaveLength(1);
  });
});

describe('a key used again around the end of its retention', () => {
  it('replays just before it; just after, the request is sent again under the same upstream key and answered', async () => {
    const clock = { now: Date.now() };
    const gw = await gateway({ IDEMPOTENCY_RETENTION: '1s' }, { testing: { clock: () => clock.now } });
    const key = randomUUID();
    const first = await gw.graphql(M.project, { input: { name: 'kept' }, key });
    expect(first.errors).toBeUndefined();
    clock.now += 999;
    const before = await gw.graphql(M.project, { input: { name: 'kept' }, key });
    expect(before.data!.createProject).toEqual({ ...first.data!.createProject, replayed: true });
    expect(projectCalls(gw)).toHaveLength(1);
    clock.now += 1;
    const after = await gw.graphql(M.project, { input: { name: 'kept' }, key });
    expect(after.errors).toBeUndefined();
    // The cloud API replays its own creation: the same project, and still one upstream.
    expect(after.data!.createProject).toEqual({ ...first.data!.createProject, replayed: false });
    expect(projectCalls(gw)).toHaveLength(2);
    expect(gw.gateway.sandbox.cloud!.projects()).toHaveLength(1);
    // Another input once that record expired too: the upstream refuses the key it saw with another request.
    clock.now += 1_000;
    const other = await gw.graphql(M.project, { input: { name: 'other' }, key });
    expect(other.errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_REJECTED', status: 409 });
    expect(gw.gateway.sandbox.cloud!.projects()).toHaveLength(1);
  });
});
