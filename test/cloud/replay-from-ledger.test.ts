import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { createChain, M } from '../helpers/cloud.js';
import {
  gatewaysPerTest,
  startTestGateway,
  tempDataDir,
  type GraphQLResponse,
  type TestGateway,
} from '../helpers/gateway.js';

/**
 * IDEMPOTENCY_REPLAY_FROM_LEDGER (docs/decisions/143): a creation's idempotency record keeps the id of the ledger record
 * written in the same commit, not a copy of it, and a replay reads the record from the ledger. The replay answers as
 * the first call did, whichever way the record was kept; records kept by the other setting replay as well.
 */
const gateway = gatewaysPerTest();

interface Call {
  query: string;
  variables: Record<string, unknown>;
  first: GraphQLResponse;
}

/** The gateway, with an idempotency key of its own added to every request made through it, and those requests. */
function keyed(gw: TestGateway): { gw: TestGateway; calls: Call[] } {
  const calls: Call[] = [];
  return {
    calls,
    gw: {
      ...gw,
      async graphql(query, variables = {}, options) {
        const withKey = { ...variables, key: randomUUID() };
        const first = await gw.graphql(query, withKey, options);
        calls.push({ query, variables: withKey, first });
        return first as GraphQLResponse<any>;
      },
    },
  };
}

/** Each call sent again with its key: the same answer, marked as a replay, and no upstream call. */
async function expectReplays(gw: TestGateway, calls: Call[]): Promise<void> {
  const before = gw.gateway.sandbox.cloud!.requests.length;
  for (const { query, variables, first } of calls) {
    const again = await gw.graphql(query, variables);
    expect(again.errors, JSON.stringify(again.errors)).toBeUndefined();
    const [name, payload] = Object.entries(first.data!)[0]!;
    expect(again.data).toEqual({ [name]: { ...payload, replayed: true } });
    expect(payload.replayed).toBe(false);
  }
  expect(gw.gateway.sandbox.cloud!.requests.length).toBe(before);
}

async function storedResponses(gw: TestGateway): Promise<unknown[]> {
  const rows = await gw.gateway.services.store.db
    .selectFrom('idempotency_records')
    .select(['response'])
    .where('operation', 'like', 'create%')
    .execute();
  return rows.map((r) => JSON.parse(r.response!) as unknown);
}

describe('IDEMPOTENCY_REPLAY_FROM_LEDGER', () => {
  it('is on unless set to false', () => {
    expect(loadConfig({}).idempotencyReplayFromLedger).toBe(true);
    expect(loadConfig({ IDEMPOTENCY_REPLAY_FROM_LEDGER: 'false' }).idempotencyReplayFromLedger).toBe(false);
  });

  it("keeps each creation's id, and every kind replays as its first call answered", async () => {
    const raw = await gateway();
    const { gw, calls } = keyed(raw);
    const chain = await createChain(gw);
    expect(calls).toHaveLength(8);
    const stored = await storedResponses(gw);
    expect(stored.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual(
      Object.values(chain)
        .sort()
        .map((id) => ({ ledger: id })),
    );
    await expectReplays(raw, calls);
  });

  it('replays the records kept by the other setting, both ways', async () => {
    for (const [write, read] of [
      ['false', 'true'],
      ['true', 'false'],
    ] as const) {
      const dataDir = tempDataDir();
      const first = await startTestGateway({ DATA_DIR: dataDir, IDEMPOTENCY_REPLAY_FROM_LEDGER: write });
      let calls: Call[];
      try {
        const run = keyed(first);
        calls = run.calls;
        await createChain(run.gw);
        const stored = (await storedResponses(first)) as Array<Record<string, unknown>>;
        // Off: a copy of the ledger record (its kind, spec and response); on: only its id. One per keyed creation.
        expect(stored).toHaveLength(calls.length);
        for (const s of stored) expect(Object.keys(s).sort()).toEqual(write === 'false' ? COPY : ['ledger']);
      } finally {
        await first.close();
      }
      await expectReplays(await gateway({ DATA_DIR: dataDir, IDEMPOTENCY_REPLAY_FROM_LEDGER: read }), calls);
    }
  });

  it('answers a replay whose record the ledger does not hold as an unexpected error, and calls nothing', async () => {
    const gw = await gateway();
    const key = randomUUID();
    const created = await gw.graphql(M.project, { input: { name: 'gone' }, key });
    const id = created.data!.createProject.project.id as string;
    await gw.gateway.services.store.db.deleteFrom('resources').where('id', '=', id).execute();
    const before = gw.gateway.sandbox.cloud!.requests.length;
    const again = await gw.graphql(M.project, { input: { name: 'gone' }, key });
    expect(again.errors).toHaveLength(1);
    expect(again.errors![0]!.extensions!.code).toBe('INTERNAL_SERVER_ERROR');
    expect(again.errors![0]!.message).not.toContain(id);
    expect(gw.logs()).toContain(`the idempotency record names resource ${id}, which the ledger does not hold`);
    expect(gw.gateway.sandbox.cloud!.requests.length).toBe(before);
  });
});

const COPY = [
  'createdAt',
  'createdBy',
  'id',
  'idempotencyKey',
  'kind',
  'parentId',
  'projectId',
  'response',
  'spec',
  'title',
].sort();
