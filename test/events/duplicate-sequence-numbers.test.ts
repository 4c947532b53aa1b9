import { sql, type Kysely, type KyselyPlugin, type RawNode } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';

import { EventLog, type EventRecord } from '../../src/events/index.js';
import type { Database } from '../../src/store/index.js';
import type { TestGateway } from '../helpers/gateway.js';
import { postNotification } from '../helpers/mobile-id.js';
import { postgresCpuMs, startReplicas, type Replicas } from '../helpers/postgres.js';

// One app posting one notification 10,000 times used to burn 10,000 sequence numbers, and every other replica then
// looked for each of them on every catch-up pass for a minute (docs/decisions/054). Two apps over real HTTP, two
// replicas on one real PostgreSQL. Nothing here is timed: the notifications go in lockstep (the next is sent once
// replica B delivered the previous one), so B makes one catch-up pass per notification, with or without the flood,
// and what is compared is counted: statements, parameters, stretches, and the index entries and pages PostgreSQL's
// own EXPLAIN ANALYZE counts for a look. (PostgreSQL's CPU time is reported, not compared: the same phase read
// 1,090-1,670 ms from run to run, and a comparison of two phases failed one run in six.)

const APPS = 'flooder:key-flooder,victim:key-victim';
/** Notifications per measured phase. */
const N = 1000;
const DUPLICATES = 10_000;

/** A failure notification: no id_token, so nothing about it waits for a key. */
const failure = (id: string) => ({ auth_req_id: id, error: 'access_denied', error_description: 'client timeout' });

interface Figures {
  /** Statements each replica ran (its store's counter). */
  statementsAtA: number;
  statementsAtB: number;
  /** B's reads of the events after the highest one it read (one per pass). */
  readsAfter: number;
  /** B's looks for late commits, and the stretches of numbers each looked in. */
  gapLooks: number;
  stretchesPerLook: number[];
  /** Numbers the stretches spanned, per look. */
  numbersPerLook: number[];
  /** A's probes for undelivered lower numbers before it publishes its own event (decision 061). */
  probesAtA: number;
  /** The stretches of B's last look and of A's last probe in the phase. */
  lastLook?: ReadonlyArray<readonly [number, number]>;
  lastProbe?: ReadonlyArray<readonly [number, number]>;
  /** CPU PostgreSQL spent (ms): reported only. */
  postgresCpuMs: number;
}

/** What PostgreSQL's EXPLAIN (ANALYZE, BUFFERS) counted for one run of a statement. */
interface Work {
  /** Entries of the events table its scans read: rows they returned, and rows a filter threw away. */
  eventsRead: number;
  /** Pages it touched (shared buffers hit or read), planning excluded. */
  pages: number;
}

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

function eventsRead(node: PlanNode): number {
  const own =
    node['Relation Name'] === 'events'
      ? (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1) + (node['Rows Removed by Filter'] ?? 0)
      : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + eventsRead(child), 0);
}

/**
 * Runs `call` on an EventLog whose statements PostgreSQL explains (ANALYZE, BUFFERS) instead of answering, and returns
 * what the one statement it ran counted: the statement as the log builds it, run again with the same parameters.
 */
async function explained(db: Kysely<Database>, call: (log: EventLog) => Promise<unknown>): Promise<Work> {
  const plans: PlanNode[] = [];
  const explaining: KyselyPlugin = {
    transformQuery({ node }) {
      if (node.kind !== 'RawNode') throw new Error(`expected a statement written as SQL, got ${node.kind}`);
      const [first = '', ...rest] = (node as RawNode).sqlFragments;
      return { ...node, sqlFragments: [`explain (analyze, buffers, format json) ${first}`, ...rest] } as RawNode;
    },
    async transformResult({ result }) {
      const [row] = result.rows as Array<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>;
      plans.push(row!['QUERY PLAN'][0]!.Plan);
      return { rows: [] };
    },
  };
  // Twice, and the second counted: the first run of a statement may also set hint bits on the pages it visits.
  const log = new EventLog(db.withPlugin(explaining), 60_000, 'postgres');
  await call(log);
  await call(log);
  expect(plans).toHaveLength(2);
  const plan = plans[1]!;
  return { eventsRead: eventsRead(plan), pages: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0) };
}

describe('duplicate notifications and burnt sequence numbers on PostgreSQL replicas', () => {
  let replicas: Replicas | undefined;
  let a: TestGateway;
  let b: TestGateway;
  let db: Kysely<Database>;
  let tokens: { flooder: string; victim: string };
  const waiting = new Map<string, () => void>();
  let readsAfter: MockInstance<EventLog['after']>;
  let gapLooks: MockInstance<EventLog['inStretches']>;
  let probes: MockInstance<EventLog['lowestIn']>;
  /** 1,000 of the victim's notifications with nothing burnt: what the other figures are compared with. */
  let baseline: Figures;

  /** The value bigserial handed out last: numbers taken, whether a row kept them or not. */
  async function lastSeqTaken(): Promise<number> {
    const { rows } = await sql<{ last_value: number }>`select last_value from events_seq_seq`.execute(db);
    return Number(rows[0]!.last_value);
  }

  /** Posts the victim's notification for `id` to A and resolves once B delivered it from the log. */
  async function sendAndAwaitB(id: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const arrived = new Promise<void>((resolve, reject) => {
      waiting.set(id, resolve);
      timer = setTimeout(() => reject(new Error(`${id} did not reach replica B within 20 s`)), 20_000);
    });
    try {
      const res = await postNotification(a, failure(id), { token: tokens.victim });
      expect(res.status).toBe(204);
      await arrived;
    } finally {
      clearTimeout(timer);
      waiting.delete(id);
    }
  }

  async function measure(prefix: string): Promise<Figures> {
    const statementsA = a.gateway.services.store.stats.queries;
    const statements = b.gateway.services.store.stats.queries;
    const reads = readsAfter.mock.calls.length;
    const looks = gapLooks.mock.calls.length;
    const probed = probes.mock.calls.length;
    const cpu = await postgresCpuMs(db);
    for (let i = 0; i < N; i++) await sendAndAwaitB(`${prefix}-${i}`);
    const cpuAfter = await postgresCpuMs(db);
    const stretches = gapLooks.mock.calls.slice(looks).map(([s]) => s);
    // A probe of no stretches returns before it runs a statement.
    const probing = probes.mock.calls
      .slice(probed)
      .map(([s]) => s)
      .filter((s) => s.length > 0);
    return {
      statementsAtA: a.gateway.services.store.stats.queries - statementsA,
      statementsAtB: b.gateway.services.store.stats.queries - statements,
      readsAfter: readsAfter.mock.calls.length - reads,
      gapLooks: stretches.length,
      stretchesPerLook: stretches.map((s) => s.length),
      numbersPerLook: stretches.map((s) => s.reduce((sum, [from, to]) => sum + to - from + 1, 0)),
      probesAtA: probing.length,
      lastLook: stretches.at(-1),
      lastProbe: probing.at(-1),
      postgresCpuMs: cpuAfter - cpu,
    };
  }

  /** What the test run reports (npx vitest run … --reporter=verbose shows it): the figures of the issue. */
  function report(name: string, f: Figures): void {
    const maxStretches = Math.max(0, ...f.stretchesPerLook);
    const maxNumbers = Math.max(0, ...f.numbersPerLook);
    console.info(
      `${name}: A ran ${f.statementsAtA} statements (${f.probesAtA} probes), B ran ${f.statementsAtB} statements (${f.readsAfter} reads after the highest, ${f.gapLooks} looks for late commits, ` +
        `at most ${maxStretches} stretches of ${maxNumbers} numbers in one look); PostgreSQL CPU ${f.postgresCpuMs.toFixed(0)} ms`,
    );
  }

  beforeAll(async () => {
    replicas = await startReplicas('duplicates', {
      GATEWAY_API_KEYS: APPS,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: 'static-token',
      MOBILEID_ISSUER: 'x',
      MOBILEID_CLIENT_ID: 'y',
      // The victim sends thousands of notifications within a minute: its per-minute storage bound
      // (APP_EVENTS_PER_MINUTE, test/tenancy/app-storage-bounds.test.ts) is not what this file measures.
      APP_EVENTS_PER_MINUTE: '0',
    });
    ({ a, b } = replicas);
    db = a.gateway.services.store.db;
    // Each app issues itself a notification token, as an app with mobile-id:write may.
    const issue = async (key: string) => {
      const res = await a.graphql(`mutation { issueMobileIdNotificationToken { token } }`, {}, { key });
      expect(res.errors).toBeUndefined();
      return res.data!.issueMobileIdNotificationToken.token as string;
    };
    tokens = { flooder: await issue('key-flooder'), victim: await issue('key-victim') };
    b.gateway.services.events.bus.subscribe('mobile-id', null, (e: EventRecord) => waiting.get(e.key)?.());
    const log = b.gateway.services.events.log;
    readsAfter = vi.spyOn(log, 'after');
    gapLooks = vi.spyOn(log, 'inStretches');
    probes = vi.spyOn(a.gateway.services.events.log, 'lowestIn');
    // Connections opened and statements planned once, before anything is measured.
    for (let i = 0; i < 100; i++) await sendAndAwaitB(`warm-${i}`);
    baseline = await measure('baseline');
    report(`${N} notifications, nothing burnt`, baseline);
  }, 180_000);
  afterAll(() => replicas?.close());

  it(`${DUPLICATES} duplicates of one notification take no sequence number and leave the other replica's work for ${N} notifications as it was`, async () => {
    const first = await postNotification(a, failure('flood'), { token: tokens.flooder });
    expect(first.status).toBe(204);
    const before = await lastSeqTaken();
    let next = 0;
    const statuses = new Map<number, number>();
    const sender = async () => {
      while (next < DUPLICATES) {
        next += 1;
        const { status } = await postNotification(a, failure('flood'), { token: tokens.flooder });
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: 16 }, sender));
    expect(Object.fromEntries(statuses)).toEqual({ 204: DUPLICATES });
    const burnt = (await lastSeqTaken()) - before;
    console.info(`${DUPLICATES} duplicates: ${burnt} sequence numbers taken`);
    expect(burnt).toBe(0);
    const stored = await db.selectFrom('events').select('seq').where('key', '=', 'flood').execute();
    expect(stored).toHaveLength(1);

    const after = await measure('after-flood');
    report(`${N} notifications after ${DUPLICATES} duplicates`, after);
    // Nothing was burnt, so nothing is looked for: B reads each notification once, as without the flood.
    expect(after.gapLooks).toBe(0);
    expect(after.readsAfter).toBeLessThanOrEqual(baseline.readsAfter + 10);
    expect(after.statementsAtB).toBeLessThanOrEqual(baseline.statementsAtB * 1.5);
    // Nor does A, which publishes them: no probe for lower numbers, and the statements of the baseline.
    expect(after.probesAtA).toBe(0);
    expect(after.statementsAtA).toBeLessThanOrEqual(baseline.statementsAtA * 1.5);
  }, 300_000);

  it(`${DUPLICATES} numbers burnt at once cost the other replica one probe of one stretch per pass, and a late commit among them still arrives once`, async () => {
    // Numbers no row will ever hold (a rolled-back insert burns one the same way), with an insert holding a lower
    // one uncommitted: B must keep looking below what it read, without one parameter or probe per number.
    let commit!: () => void;
    const committing = new Promise<void>((resolve) => (commit = resolve));
    let early: EventRecord | undefined;
    const held = db.transaction().execute(async (trx) => {
      const appended = await new EventLog(trx, 60_000, 'postgres').append({
        kind: 'mobile-id',
        key: 'late-commit',
        dedupeKey: 'mobile-id:late-commit',
        payload: failure('late-commit'),
      });
      early = appended.event;
      await committing;
    });
    try {
      await expect.poll(() => early !== undefined, { timeout: 20_000 }).toBe(true);
      // The control: the same passes with only the held number to look for (B looks once per pass, A probes before
      // publishing), so that what the 10,000 numbers add is compared with the same work rather than with the baseline.
      const control = await measure('held');
      report(`${N} notifications while one lower number is held`, control);
      expect(control.gapLooks).toBeGreaterThan(0);
      expect(Math.max(...control.numbersPerLook)).toBe(1);
      await sql`select nextval('events_seq_seq') from generate_series(1, ${DUPLICATES})`.execute(db);
      const burnt = await measure('after-burn');
      report(`${N} notifications after ${DUPLICATES} burnt numbers`, burnt);
      // The first pass finds one stretch (the held number) and one of 10,000; then each pass looks once, in at most
      // those two stretches, whatever they span: one statement with the same three parameters.
      expect(burnt.gapLooks).toBeLessThanOrEqual(burnt.readsAfter);
      expect(Math.max(...burnt.stretchesPerLook)).toBeLessThanOrEqual(2);
      expect(Math.max(...burnt.numbersPerLook)).toBe(DUPLICATES + 1);
      expect(burnt.readsAfter).toBeLessThanOrEqual(baseline.readsAfter + 10);
      expect(burnt.statementsAtB).toBeLessThanOrEqual(baseline.statementsAtB * 2.5);
      // The 10,000 numbers cost PostgreSQL nothing per number: B's look and A's own probe before it publishes
      // (decision 061) read no more of the log than with the held number alone, and touch at most the pages of one
      // more index probe. The last of each in both phases, explained: A's probe once walked the whole index from its
      // lowest number when the numbers made two stretches (3,100 entries per probe), and B's look once read the whole
      // log per stretch (decision 109).
      expect(control.probesAtA).toBeGreaterThan(0);
      expect(burnt.probesAtA).toBeGreaterThan(0);
      expect(burnt.lastProbe).toHaveLength(2);
      for (const [what, call] of [
        ["B's look", (log: EventLog, f: Figures) => log.inStretches(f.lastLook!)],
        ["A's probe", (log: EventLog, f: Figures) => log.lowestIn(f.lastProbe!)],
      ] as const) {
        const held = await explained(db, (log) => call(log, control));
        const withBurnt = await explained(db, (log) => call(log, burnt));
        console.info(
          `${what}: one number held ${JSON.stringify(held)}; and ${DUPLICATES} burnt ${JSON.stringify(withBurnt)}`,
        );
        expect(withBurnt.eventsRead, what).toBeLessThanOrEqual(held.eventsRead);
        expect(withBurnt.pages, what).toBeLessThanOrEqual(held.pages * 2);
      }
    } finally {
      commit();
      await held;
    }
    const delivered: number[] = [];
    const stop = b.gateway.services.events.bus.subscribe(
      'mobile-id',
      'late-commit',
      (e: EventRecord) => void delivered.push(e.seq),
    );
    try {
      await a.gateway.services.events.bus.publish(early!);
      await expect.poll(() => delivered, { timeout: 20_000 }).toEqual([early!.seq]);
      // One more notification: a second delivery of the late one would have come before it.
      await sendAndAwaitB('after-late-commit');
      expect(delivered).toEqual([early!.seq]);
    } finally {
      stop();
    }
  }, 300_000);

  it('a duplicate sent while the first delivery has not committed takes no number, and is told apart once it commits', async () => {
    const log = a.gateway.services.events.log;
    const event = { kind: 'mobile-id', key: 'overlap', dedupeKey: 'mobile-id:overlap', payload: failure('overlap') };
    let commit!: () => void;
    const committing = new Promise<void>((resolve) => (commit = resolve));
    let first: EventRecord | undefined;
    const held = db.transaction().execute(async (trx) => {
      first = (await new EventLog(trx, 60_000, 'postgres').append(event)).event;
      await committing;
    });
    let copies: Promise<unknown> | undefined;
    try {
      await expect.poll(() => first !== undefined, { timeout: 20_000 }).toBe(true);
      const taken = await lastSeqTaken();
      expect(taken).toBe(first!.seq);
      // Two copies of the same notification and one that differs, all while the first is not committed.
      copies = Promise.all([log.append(event), log.append(event), log.append({ ...event, payload: failure('other') })]);
      // Each copy waits on PostgreSQL for the first one's transaction to end.
      await expect
        .poll(
          async () => {
            const { rows } = await sql<{
              n: number;
            }>`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`.execute(
              db,
            );
            return rows[0]!.n;
          },
          { timeout: 20_000 },
        )
        .toBe(3);
      expect(await lastSeqTaken()).toBe(taken);
    } finally {
      commit();
      await held;
    }
    const results = (await copies) as Array<{ status: string; event: EventRecord }>;
    expect(results.map((r) => [r.status, r.event.seq])).toEqual([
      ['duplicate', first!.seq],
      ['duplicate', first!.seq],
      ['conflict', first!.seq],
    ]);
    expect(await lastSeqTaken()).toBe(first!.seq);
  });

  it('however many stretches numbers are burnt in, one look covers at most 1,000 of them, the newest', async () => {
    // 1,100 events, each above a burnt number, read by B in one pass: 1,100 stretches of one number each.
    const log = a.gateway.services.events.log;
    let last!: EventRecord;
    for (let i = 0; i < 1100; i++) {
      await sql`select nextval('events_seq_seq')`.execute(db);
      last = (await log.append({ kind: 'stretches', key: `s-${i}`, dedupeKey: `stretches:${i}`, payload: { i } }))
        .event;
    }
    const looks = gapLooks.mock.calls.length;
    // B reads them in batches and looks for late commits before it delivers each batch (so that one acknowledged
    // before an event of the batch comes first, docs/decisions/061): the look before the last event holds the newest.
    const arrived = new Promise<number>((resolve) => {
      const stop = b.gateway.services.events.bus.subscribe('stretches', last.key, () => {
        stop();
        resolve(gapLooks.mock.calls.length);
      });
    });
    await sql`select pg_notify('gateway_events', ${JSON.stringify({ seq: last.seq })})`.execute(db);
    const looked = await arrived;
    expect(looked).toBeGreaterThan(looks);
    const pass = gapLooks.mock.calls.slice(looks, looked).map(([s]) => s);
    for (const stretches of pass) expect(stretches.length).toBeLessThanOrEqual(1000);
    const stretches = pass.at(-1)!;
    expect(stretches).toHaveLength(1000);
    expect(stretches.at(-1)).toEqual([last.seq - 1, last.seq - 1]);
  });
});
