import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { freePort, startEmbeddedPostgres } from '../../scripts/embedded-postgres.js';
import { EventLog, type EventRecord } from '../../src/events/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient, type Collected } from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { gatewayProcesses } from '../helpers/process.js';
import { subscribers as busSubscribers, waitFor } from '../helpers/wait.js';

// Faults on the path events take between replicas: PostgreSQL restarting, a replica's LISTEN connection killed,
// PostgreSQL not there yet when a replica starts. Every wait below waits for a condition, with a deadline.

/** Waits for `check`, failing with `what` after the deadline (a minute: PostgreSQL restarts on the way). */
const until = async (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> => {
  await waitFor(check, timeoutMs, what);
};

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await request(url);
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? JSON.parse(text) : null };
}

/** A failure notification for `id`: no id_token, so nothing about it waits for a key. */
const failure = (id: string) => ({ auth_req_id: id, error: 'access_denied', error_description: 'client timeout' });

interface Deployment {
  pg: TestPostgres;
  url: string;
  a: TestGateway;
  b: TestGateway;
  /** Sequence numbers of the mobile-ID events B's bus delivered, in order (one per delivery). */
  deliveredAtB: number[];
  close(): Promise<void>;
}

async function deployment(name: string): Promise<Deployment> {
  const pgServer = await startPostgres();
  const url = await pgServer.createDatabase(name);
  const shared = { DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex') };
  const a = await startTestGateway(shared);
  const b = await startTestGateway(shared);
  const deliveredAtB: number[] = [];
  b.gateway.services.events.bus.subscribe('mobile-id', null, (e) => deliveredAtB.push(e.seq));
  return {
    pg: pgServer,
    url,
    a,
    b,
    deliveredAtB,
    async close() {
      await a.close();
      await b.close();
      await pgServer.stop();
    },
  };
}

/** Subscribes on `gw` to each id and waits until each is a live listener on its bus (not only a read of the log). */
async function subscribers(
  gw: TestGateway,
  ids: string[],
): Promise<{ byId: Map<string, Collected>; dispose(): Promise<void> }> {
  const client = wsClient(gw);
  const byId = new Map(ids.map((id) => [id, collect(client, SUBSCRIPTION, { id })]));
  await until('every subscriber listens', () => ids.every((id) => busSubscribers(gw, 'mobile-id', id) > 0));
  return { byId, dispose: () => client.dispose() as Promise<void> };
}

/** The sequence numbers of the stored mobile-ID events of `ids`. */
async function storedSeqs(gw: TestGateway, ids: string[]): Promise<number[]> {
  const rows = await gw.gateway.services.store.db
    .selectFrom('events')
    .select('seq')
    .where('kind', '=', 'mobile-id')
    .where('key', 'in', ids)
    .orderBy('seq')
    .execute();
  return rows.map((r) => Number(r.seq));
}

/** Every acknowledged event reached its subscriber once, and B's bus delivered each exactly once. */
async function expectDeliveredOnce(d: Deployment, subs: Map<string, Collected>, ids: string[]): Promise<void> {
  await until('every subscriber on B has its result', () => ids.every((id) => subs.get(id)!.completed()));
  // A barrier: one more event, delivered after everything before it; a late duplicate would be counted by then.
  const barrier = `barrier-${randomBytes(4).toString('hex')}`;
  expect((await postNotification(d.a, failure(barrier))).status).toBe(204);
  const [barrierSeq] = await storedSeqs(d.a, [barrier]);
  await until('the barrier event reaches B', () => d.deliveredAtB.includes(barrierSeq!));
  for (const id of ids) {
    const c = subs.get(id)!;
    expect(c.errors).toEqual([]);
    expect(c.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual([id]);
  }
  const seqs = await storedSeqs(d.a, ids);
  expect(seqs).toHaveLength(ids.length);
  const counts = seqs.map((s) => d.deliveredAtB.filter((x) => x === s).length);
  expect(counts).toEqual(seqs.map(() => 1));
}

describe('faults on the shared PostgreSQL path', () => {
  let d: Deployment | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('every webhook acknowledged while PostgreSQL restarts reaches its subscriber on another replica, once', async () => {
    d = await deployment('restart');
    // 20 subscribers waiting on B: enough to see every path (before, during and after the restart), fast to run.
    const ids = Array.from({ length: 20 }, (_, i) => `restart-${i}`);
    const subs = await subscribers(d.b, ids);
    try {
      for (const id of ids.slice(0, 5)) expect((await postNotification(d.a, failure(id))).status).toBe(204);
      // The sender keeps sending the rest to A, each until it is acknowledged, as a mobile identity service retries.
      let refused = 0;
      const acknowledged: string[] = [];
      const sender = (async () => {
        for (const id of ids.slice(5)) {
          for (;;) {
            const res = await postNotification(d!.a, failure(id)).catch(() => ({ status: 0 }));
            if (res.status === 204) break;
            refused += 1;
            await sleep(50);
          }
          acknowledged.push(id);
        }
      })();
      await d.pg.restart({
        whileStopped: () => until('a webhook is refused while PostgreSQL is down', () => refused > 0),
      });
      await sender;
      expect(acknowledged).toEqual(ids.slice(5));
      await expectDeliveredOnce(d, subs.byId, ids);
    } finally {
      await subs.dispose();
    }
  }, 180_000);

  it('a replica whose LISTEN connection is killed is not ready until it listens again, then delivers what it missed', async () => {
    d = await deployment('listener');
    const ids = Array.from({ length: 5 }, (_, i) => `listener-${i}`);
    const subs = await subscribers(d.b, ids);
    const admin = new pg.Client({ connectionString: d.url });
    await admin.connect();
    try {
      expect((await getJson(`${d.b.url}/readyz`)).status).toBe(200);
      // Kill B's listener, and again each time it comes back, until the events below are acknowledged.
      let killing = true;
      let kills = 0;
      const killer = (async () => {
        while (killing) {
          const { rowCount } = await admin.query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE (application_name = 'gateway-events' OR query ILIKE 'LISTEN%') AND pid <> pg_backend_pid()`,
          );
          kills += rowCount ?? 0;
          await sleep(10);
        }
      })();
      let seen: { status: number; body: any } | undefined;
      await until('B reports not ready', async () => {
        seen = await getJson(`${d!.b.url}/readyz`);
        return seen.status === 503;
      });
      expect(seen!.body).toMatchObject({
        status: 'unavailable',
        store: 'postgres',
        error: expect.stringMatching(/not listening/),
      });
      for (const id of ids) expect((await postNotification(d.a, failure(id))).status).toBe(204);
      killing = false;
      await killer;
      expect(kills).toBeGreaterThan(0);
      await until('B is ready again', async () => (await getJson(`${d!.b.url}/readyz`)).status === 200);
      expect(d.b.logs()).toContain('the event LISTEN connection dropped');
      expect(d.b.logs()).toContain('the event LISTEN connection is back');
      await expectDeliveredOnce(d, subs.byId, ids);
    } finally {
      await admin.end();
      await subs.dispose();
    }
  }, 180_000);

  it('an event whose insert commits after a later one still reaches the other replica', async () => {
    d = await deployment('reorder');
    const db = d.a.gateway.services.store.db;
    // bigserial hands out the number at insert: hold one insert's transaction open while a later webhook commits.
    let commit!: () => void;
    const committing = new Promise<void>((resolve) => (commit = resolve));
    let early: EventRecord | undefined;
    const held = db.transaction().execute(async (trx) => {
      const appended = await new EventLog(trx, 60_000, 'postgres').append({
        kind: 'mobile-id',
        key: 'early',
        dedupeKey: 'mobile-id:early',
        payload: failure('early'),
      });
      early = appended.event;
      await committing;
    });
    await until('the early insert has its number', () => early !== undefined);
    // A stream over every key (as verificationCompleted without an id) on B sees both, in the order they arrive.
    const everyKey = d.b.gateway.services.events.streams.subscribe({ kind: 'mobile-id' });
    const streamed: number[] = [];
    const streaming = (async () => {
      for await (const e of everyKey) streamed.push(e.seq);
    })();
    expect((await postNotification(d.a, failure('later'))).status).toBe(204);
    const [later] = await storedSeqs(d.a, ['later']);
    expect(later).toBeGreaterThan(early!.seq);
    await until('B delivers the later event', () => d!.deliveredAtB.includes(later!));
    commit();
    await held;
    await d.a.gateway.services.events.bus.publish(early!);
    await until('B delivers the event that committed last', () => d!.deliveredAtB.includes(early!.seq));
    expect(d.deliveredAtB.filter((s) => s === early!.seq)).toHaveLength(1);
    await until('the stream over every key yields the event that committed last', () => streamed.includes(early!.seq));
    expect(streamed).toEqual([later, early!.seq]);
    await everyKey.return(undefined);
    await streaming;
  }, 120_000);
});

describe('PostgreSQL unreachable at start-up', () => {
  const start = gatewayProcesses();

  it('a gateway started before PostgreSQL waits, says so in the log and /readyz, and serves once PostgreSQL comes', async () => {
    const port = await freePort();
    const password = randomBytes(12).toString('hex');
    const gw = await start(
      {
        DATABASE_URL: `postgresql://postgres:${password}@127.0.0.1:${port}/postgres`,
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      },
      { until: 'listening: not ready' },
    );
    let server: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
    try {
      await gw.waitFor('PostgreSQL is not reachable: waiting for it, retrying with backoff');
      expect(await getJson(`${gw.url}/healthz`)).toEqual({ status: 200, body: { status: 'ok' } });
      const readyz = await getJson(`${gw.url}/readyz`);
      expect(readyz.status).toBe(503);
      expect(readyz.body).toMatchObject({
        status: 'starting',
        error: expect.stringMatching(/waiting for PostgreSQL at postgresql:\/\/127\.0\.0\.1:\d+\/postgres/),
      });
      const graphql = await request(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"query":"{ __typename }"}',
      });
      expect(graphql.statusCode).toBe(503);
      expect(graphql.headers['retry-after']).toBe('5');
      await graphql.body.dump();
      // Retried with backoff: a second attempt, and still alive.
      await until('a second attempt is logged', () => gw.output().split('PostgreSQL is not reachable').length > 2);
      expect(gw.child.exitCode).toBeNull();

      server = await startEmbeddedPostgres({ port, password });
      await gw.waitFor('gateway ready');
      expect(gw.output()).toContain('PostgreSQL answers: starting');
      // The body also shows each upstream's circuit breaker (docs/decisions/056), all closed at start-up.
      const closed = {
        cloud: 'closed',
        'cloud-token': 'closed',
        identification: 'closed',
        'identification-prodlike': 'closed',
        verification: 'closed',
        rfm: 'closed',
      };
      expect(await getJson(`${gw.url}/readyz`)).toEqual({
        status: 200,
        body: { status: 'ready', store: 'postgres', circuits: closed },
      });
      const served = await request(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"query":"{ __typename }"}',
      });
      expect(served.statusCode).toBe(200);
      expect(await served.body.json()).toEqual({ data: { __typename: 'Query' } });
      expect(gw.child.exitCode).toBeNull();
      expect(gw.output()).not.toContain(password);
    } finally {
      gw.child.kill('SIGKILL');
      await server?.stop();
    }
  }, 120_000);
});
