import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { FaultSpec } from '../../src/sandbox/faults.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest, type GraphQLResponse, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A call whose process stalls longer than its lease (IDEMPOTENCY_TAKEOVER) may be taken over by a retry with the same
 * key while it still runs (docs/decisions/012). When it resumes, its end must not touch the record that is now the
 * retry's: one call in flight per key, and the stored answer is that of the call that owns the record. The stall is a
 * held upstream request and a test clock moved past the lease; nothing waits for a duration.
 */

const gateway = gatewaysPerTest();

const HOUR_MS = 3_600_000;

const projectCalls = (gw: TestGateway) =>
  gw.gateway.sandbox.cloud!.requests.filter((r) => r.path === '/apis/projects/public/v4/projects');

const NOT_RENEWED = 'idempotency lease could not be renewed';
const LOST = 'another call took its key over';
const count = (text: string, part: string) => text.split(part).length - 1;

describe.each(['SQLite', 'PostgreSQL'])('on %s, a call that ran on after its idempotency lease lapsed', (dialect) => {
  let pg: TestPostgres | undefined;
  beforeAll(async () => {
    if (dialect === 'PostgreSQL') pg = await startPostgres();
  }, 120_000);
  afterAll(() => pg?.stop());

  /**
   * Call A claims `key` and is held upstream; the clock passes its lease; call B, with the same key and input, takes
   * the key over and is held upstream too. Returns both calls and B's hold. `leaseMs`: an hour unless given, so that no
   * renewal timer fires during the test and only the test clock lets the lease lapse.
   */
  async function takenOver(key: string, leaseMs = HOUR_MS) {
    let now = Date.now();
    const store: Record<string, string> = pg
      ? { DATABASE_URL: await pg.createDatabase(`lease_${randomUUID().replaceAll('-', '')}`) }
      : {};
    const gw = await gateway(
      { ...store, IDEMPOTENCY_TAKEOVER: `${leaseMs}ms`, IDEMPOTENCY_WAIT: '100ms' },
      { testing: { clock: () => now } },
    );
    const faults = gw.gateway.sandbox.cloud!.faults;
    const heldA = faults.hold();
    const a = gw.graphql(M.project, { input: { name: 'stalled' }, key });
    await waitFor(() => heldA.arrived() === 1, 20_000, 'call A upstream');
    now += leaseMs + 1;
    const heldB = faults.hold();
    const b = gw.graphql(M.project, { input: { name: 'stalled' }, key });
    await waitFor(() => heldB.arrived() === 1, 20_000, 'call B upstream (it took the key over)');
    /** A's request goes on, answered as `fault` says (or as the upstream does), while B's is still held. */
    const resumeA = (fault?: FaultSpec) => {
      if (fault) faults.enqueue(fault);
      heldA.release();
      return a;
    };
    return { gw, b, heldB, resumeA };
  }

  /**
   * What a third call C with the same key gets while B still runs: its error code, `replayed` when it replays a stored
   * answer, or `sent upstream` once its request reached the upstream (where it is held with B's).
   */
  async function thirdCall(gw: TestGateway, key: string, heldB: { arrived(): number }): Promise<string> {
    let answered = false;
    const answer = gw.graphql(M.project, { input: { name: 'stalled' }, key }).then((res) => {
      answered = true;
      const code = res.errors?.[0]?.extensions?.code as string | undefined;
      return code ?? (res.data!.createProject.replayed ? 'replayed' : 'answered');
    });
    const sent = waitFor(() => answered || heldB.arrived() > 1, 20_000, 'call C answered or upstream').then(
      () => 'sent upstream',
    );
    return Promise.race([answer, sent]);
  }

  /** B, released, completes the record: a later call replays B's answer, and one project exists upstream. */
  async function bCompletes(gw: TestGateway, key: string, b: Promise<GraphQLResponse>) {
    const done = await b;
    expect(done.data!.createProject).toMatchObject({ idempotencyKey: key, replayed: false });
    const again = await gw.graphql(M.project, { input: { name: 'stalled' }, key });
    expect(again.data!.createProject).toEqual({ ...done.data!.createProject, replayed: true });
    expect(gw.gateway.sandbox.cloud!.projects()).toHaveLength(1);
    return done.data!.createProject;
  }

  it('fails without releasing the key: the call that took it over keeps it; a third call waits', async () => {
    const key = randomUUID();
    const { gw, b, heldB, resumeA } = await takenOver(key);
    const a = await resumeA({ status: 402 });
    expect(a.errors![0]!.extensions!.code).toBe('UPSTREAM_REJECTED');

    const c = await thirdCall(gw, key, heldB);
    heldB.release();
    await bCompletes(gw, key, b);
    expect(c, 'C neither ran beside B nor claimed the key B holds').toBe('IDEMPOTENCY_KEY_IN_USE');
    expect(projectCalls(gw)).toHaveLength(2);
    expect(gw.logs()).toContain(LOST);
  });

  it('keeps its unreadable answer without parking the key: the key stays with B, whose answer is stored', async () => {
    const key = randomUUID();
    const { gw, b, heldB, resumeA } = await takenOver(key);
    const a = await resumeA('ok-no-id');
    expect(a.errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');

    const c = await thirdCall(gw, key, heldB);
    heldB.release();
    // The upstream replays A's creation to B under the same upstream key, in its readable shape.
    await bCompletes(gw, key, b);
    expect(c, "C did not read A's kept answer again beside B").toBe('IDEMPOTENCY_KEY_IN_USE');
    expect(gw.logs()).toContain(LOST);
  });

  it('answers its caller without storing: record and ledger are written by B; one project exists', async () => {
    const key = randomUUID();
    const { gw, b, heldB, resumeA } = await takenOver(key);
    const a = await resumeA();
    expect(a.errors).toBeUndefined();
    expect(a.data!.createProject).toMatchObject({ idempotencyKey: key, replayed: false });

    const c = await thirdCall(gw, key, heldB);
    heldB.release();
    const stored = await bCompletes(gw, key, b);
    expect(c, 'C got no answer stored by A while B ran').toBe('IDEMPOTENCY_KEY_IN_USE');
    expect(stored.project.id).toBe(a.data!.createProject.project.id);
    expect(gw.logs()).toContain(LOST);
  });

  it("renews nothing once taken over: its renewals leave B's lease alone, and its answer is not stored", async () => {
    const key = randomUUID();
    // The shortest lease: renewals every 100 ms of real time, at the test clock's time, which only the test moves.
    const { gw, b, heldB, resumeA } = await takenOver(key, 300);
    // A renewal of A's after B took over, refused (A's earlier ones may have failed too: the clock passed its lease).
    const before = count(gw.logs(), NOT_RENEWED);
    await waitFor(() => count(gw.logs(), NOT_RENEWED) > before, 20_000, "a renewal of A's after the takeover");
    const a = await resumeA();
    expect(a.errors).toBeUndefined();

    const c = await thirdCall(gw, key, heldB);
    heldB.release();
    await bCompletes(gw, key, b);
    expect(c, 'C got no answer stored by A while B ran').toBe('IDEMPOTENCY_KEY_IN_USE');
    expect(gw.logs()).toContain(LOST);
  });
});
