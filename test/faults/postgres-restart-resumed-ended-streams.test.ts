// The two streams that end (mobileIdAuthentication, provisioningProgress) resumed with a cursor of replica A on replica
// B while PostgreSQL is stopped (as a client reconnects during a restart): the fault matrix's "subscription (resumed
// from the log)" row. The subscription is answered as usual, waits out the stop, and once PostgreSQL is back delivers
// what came after its cursor, once and in order, then completes; with no error. Two gateways on one embedded
// PostgreSQL, real graphql-ws clients.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, wsClient, type Collected } from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import {
  deliveredEverywhere,
  kafkaInput,
  MOBILE_ID_AFTER,
  PROGRESS_AFTER,
  PROVISION_KAFKA,
} from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'restart-resume-key';

const MOBILE_ID = MOBILE_ID_AFTER;
const PROGRESS = PROGRESS_AFTER;

let pg: TestPostgres;
let a: TestGateway;
let b: TestGateway;
beforeAll(async () => {
  pg = await startPostgres();
  const shared = {
    DATABASE_URL: await pg.createDatabase('restart_resume'),
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    GATEWAY_API_KEYS: KEY,
  };
  a = await startTestGateway(shared);
  b = await startTestGateway(shared);
}, 120_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
  await pg?.stop();
});

const overWs = (t: TestGateway, query: string, variables: Record<string, unknown>): Collected =>
  collect(wsClient(t, { key: KEY }), query, variables);

/** Reads of `target`'s methods `names` that failed, counted as they fail (B's streams hold these same objects). */
function countFailures(target: object, names: string[]): { n: number } {
  const failed = { n: 0 };
  const methods = target as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const name of names) {
    const original = methods[name]!.bind(target);
    methods[name] = (...args: unknown[]) =>
      original(...args).catch((err: unknown) => {
        failed.n += 1;
        throw err;
      });
  }
  return failed;
}

describe('resumed streams that end, opened on replica B while PostgreSQL is stopped', () => {
  it('mobileIdAuthentication and provisioningProgress wait out the stop, then deliver what came after the cursor, once, and complete', async () => {
    const failedLog = countFailures(b.gateway.services.events.log, ['range', 'latest']);
    const failedRow = countFailures(b.gateway.services.provisioning, ['get']);
    // A cursor before everything below, and the mobile-ID result after it.
    await deliveredEverywhere(a, b);
    const start = a.gateway.services.events.cursors.encode(a.gateway.services.events.bus.position(), Date.now());
    const n = await a.gateway.sandbox.mobileId!.buildNotification({
      authReqId: 'restart-1',
      outcome: 'CLIENT_TIMEOUT',
    });
    expect((await postNotification(a, n.body)).status).toBe(204);

    const res = await a.graphql(
      PROVISION_KAFKA,
      { input: kafkaInput('restart-resume-1', '10.62.0.0/24') },
      { key: KEY },
    );
    expect(res.errors).toBeUndefined();
    const id = res.data!.provisionKafkaCluster.provisioning.id as string;
    await a.gateway.services.provisioning.idle();
    const all = overWs(a, PROGRESS, { id, after: start });
    await all.done;
    const view = (x: any) => JSON.stringify(x.data.provisioningProgress);
    const states = all.results.map((x) => ({ json: view(x), cursor: x.extensions.cursor as string }));
    expect(states.at(-1)!.json).toContain('SUCCEEDED');
    await deliveredEverywhere(a, b);

    let mobile!: Collected;
    let progress!: Collected;
    await pg.restart({
      whileStopped: async () => {
        const before = { log: failedLog.n, row: failedRow.n };
        mobile = overWs(b, MOBILE_ID, { id: 'restart-1', after: start });
        progress = overWs(b, PROGRESS, { id, after: states[1]!.cursor });
        // Both have started and found the database away.
        await waitFor(
          () => failedLog.n > before.log && failedRow.n > before.row,
          30_000,
          'the resumed streams reached the stopped database',
        );
      },
    });
    await mobile.done;
    await progress.done;
    expect(mobile.errors).toEqual([]);
    expect(mobile.results.flatMap((x) => x.errors ?? [])).toEqual([]);
    expect(mobile.results.map((x) => x.data.mobileIdAuthentication.authReqId)).toEqual(['restart-1']);
    expect(progress.errors).toEqual([]);
    expect(progress.results.flatMap((x) => x.errors ?? [])).toEqual([]);
    expect(progress.results.map(view)).toEqual(states.slice(2).map((s) => s.json));
  }, 180_000);
});
