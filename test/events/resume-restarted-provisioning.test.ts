// A provisioning that FAILED is restarted by calling again with the same key. A resume of provisioningProgress from a
// cursor taken at the FAILED state (graphql-ws with `after`, SSE with Last-Event-ID) completes at once while no restart
// exists, and once one does, delivers the restart's states up to its own terminal state instead of completing. Real
// server on port 0, SQLite on disk, real clients; the sandbox fails the cluster step once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, wsClient, type Collected } from '../helpers/mobile-id.js';
import { ended, kafkaInput, PROGRESS_AFTER, PROGRESS_SSE, sseStream } from '../helpers/resumable.js';

const KEY = 'resume-restarted-key';
const PROVISION = /* GraphQL */ `
  mutation ($input: ProvisionKafkaClusterInput!, $key: UUID) {
    provisionKafkaCluster(input: $input, idempotencyKey: $key) {
      replayed
      provisioning {
        id
        state
      }
    }
  }
`;

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ GATEWAY_API_KEYS: KEY, UPSTREAM_MAX_RETRIES: '0' });
});
afterAll(async () => {
  await t?.close();
});

const overWs = (variables: Record<string, unknown>): Collected =>
  collect(wsClient(t, { key: KEY }), PROGRESS_AFTER, variables);
const view = (r: any) => JSON.stringify(r.data.provisioningProgress);

describe('provisioningProgress resumed from the cursor of a FAILED state', () => {
  it('completes at once while no restart exists; once the same key restarted it, delivers the restart up to its terminal state, over graphql-ws and SSE', async () => {
    const { cursors, bus } = t.gateway.services.events;
    // A cursor from before the provisioning: a resume from it replays every state, each with its cursor.
    const before = cursors.encode(bus.position(), Date.now());
    const sandbox = t.gateway.sandbox.cloud!;
    // The cluster step (the creation after project, network, subnet and IP address) fails once.
    sandbox.faults.enqueueFor(
      (path, method) => method === 'POST' && path === '/ocs/v1/services' && sandbox.resources().length === 3,
      '503',
    );
    const key = randomUUID();
    const input = kafkaInput('restarted', '10.61.0.0/24');
    const first = await t.graphql(PROVISION, { input, key }, { key: KEY });
    expect(first.errors).toBeUndefined();
    const id = first.data!.provisionKafkaCluster.provisioning.id as string;
    await t.gateway.services.provisioning.idle();

    const failedRun = overWs({ id, after: before });
    await ended(failedRun.done, 'the replay of the failed run');
    expect(failedRun.errors).toEqual([]);
    expect(failedRun.results.at(-1)!.data.provisioningProgress.state).toBe('FAILED');
    const failedCursor = failedRun.results.at(-1)!.extensions.cursor as string;

    // No restart yet: the stream ended at FAILED, inside the cursor.
    const early = overWs({ id, after: failedCursor });
    await ended(early.done, 'the resume after FAILED, before a restart');
    expect(early.completed()).toBe(true);
    expect(early.results).toEqual([]);

    const again = await t.graphql(PROVISION, { input, key }, { key: KEY });
    expect(again.data!.provisionKafkaCluster).toMatchObject({ replayed: false, provisioning: { id } });
    await t.gateway.services.provisioning.idle();

    // The restart's events: those of the provisioning logged after the FAILED state.
    const { db } = t.gateway.services.store;
    const rows = await db
      .selectFrom('events')
      .select(['seq', 'payload'])
      .where('kind', '=', 'provisioning')
      .where('key', '=', id)
      .orderBy('seq')
      .execute();
    const restart = rows.slice(failedRun.results.length).map((r) => {
      const payload = typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload;
      return payload.state as string;
    });
    expect(restart.length).toBeGreaterThan(1);
    expect(restart[0]).toBe('RUNNING');
    expect(restart.at(-1)).toBe('SUCCEEDED');

    const resumed = overWs({ id, after: failedCursor });
    await ended(resumed.done, 'the resume after FAILED, after the restart');
    expect(resumed.errors).toEqual([]);
    expect(resumed.completed()).toBe(true);
    expect(resumed.results.map((r) => r.data.provisioningProgress.state)).toEqual(restart);
    const cursorsOf = resumed.results.map((r) => r.extensions.cursor as string);
    expect(new Set([failedCursor, ...cursorsOf]).size).toBe(restart.length + 1);

    const overSse = await sseStream(t, KEY, PROGRESS_SSE, { id }, failedCursor);
    await ended(overSse.done, 'the SSE resume after FAILED, after the restart');
    expect(overSse.nexts().map((e) => JSON.stringify(e.data.data.provisioningProgress))).toEqual(
      resumed.results.map(view),
    );
    expect(overSse.nexts().map((e) => e.id)).toEqual(cursorsOf);
    expect(overSse.events.at(-1)!.event).toBe('complete');

    // A cursor at the restart's own terminal state: that ended the stream, which completes at once.
    const last = overWs({ id, after: cursorsOf.at(-1) });
    await ended(last.done, 'the resume after the restart SUCCEEDED');
    expect(last.results).toEqual([]);
  });
});
