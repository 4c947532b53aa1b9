import fs from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * SQLITE_CLAIM_WITHOUT_SYNC (docs/decisions/078): the claim of a fresh idempotency key no longer waits for its WAL
 * sync before the upstream call, and still nothing is answered before the completion's sync; on and off give the
 * same answers and the same rows.
 */
const gateway = gatewaysPerTest();

const projectCalls = (gw: TestGateway) =>
  gw.gateway.sandbox.cloud!.requests.filter((r) => r.path === '/apis/projects/public/v4/projects');

/** Lets the event loop run `n` full turns (no clock). */
async function turnsOfTheLoop(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** Holds every fdatasync of this process until the test releases it: the disk "answers" when the test says so. */
function holdSyncs(): { held: () => number; releaseAll: () => void } {
  const syncs: Array<() => void> = [];
  const real = fs.fdatasync;
  vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
    syncs.push(() => real(fd, cb));
  }) as typeof fs.fdatasync);
  return { held: () => syncs.length, releaseAll: () => syncs.splice(0).forEach((release) => release()) };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('SQLITE_CLAIM_WITHOUT_SYNC', () => {
  it('is on unless set to false', () => {
    expect(loadConfig({}).sqliteClaimWithoutSync).toBe(true);
    expect(loadConfig({ SQLITE_CLAIM_WITHOUT_SYNC: 'false' }).sqliteClaimWithoutSync).toBe(false);
  });

  it.each([
    { on: true, what: 'the upstream call starts while the claim is not synced' },
    { on: false, what: 'the upstream call waits for the claim’s sync' },
  ])('on: $on: $what; either way the answer waits for the completion’s sync', async ({ on }) => {
    const gw = await gateway({ SQLITE_CLAIM_WITHOUT_SYNC: String(on) });
    const disk = holdSyncs();
    let answered = false;
    const answer = gw.graphql(M.project, { input: { name: 'held' } }).then((res) => {
      answered = true;
      return res;
    });
    if (on) {
      // Every sync is held, and the upstream is called all the same: the claim did not wait for one.
      await waitFor(() => projectCalls(gw).length === 1, 20_000, 'the upstream call');
    } else {
      // The claim is committed and its sync asked for; the upstream is not called until that sync returns.
      await waitFor(() => disk.held() > 0, 20_000, "the claim's sync");
      await turnsOfTheLoop(5);
      expect(projectCalls(gw)).toHaveLength(0);
      // The disk answers until the upstream is called (a sync of another write may come first), and no longer: the
      // completion's sync stays held.
      await waitFor(
        () => {
          if (projectCalls(gw).length === 1) return true;
          disk.releaseAll();
          return false;
        },
        20_000,
        'the upstream call',
      );
    }
    // The completion is committed and its sync asked for: no answer until it returns.
    await waitFor(() => disk.held() > 0, 20_000, "the completion's sync");
    await turnsOfTheLoop(5);
    expect(answered).toBe(false);
    while (!answered) {
      disk.releaseAll();
      await turnsOfTheLoop(1);
    }
    const res = await answer;
    expect(res.errors).toBeUndefined();
    expect(res.data!.createProject).toMatchObject({ project: { name: 'held' }, replayed: false });
  });

  it('gives the same answers and keeps the same rows on and off', async () => {
    const keys = {
      project: '6a0c8f0e-1b2c-4d3e-8f40-5a6b7c8d9e01',
      network: '6a0c8f0e-1b2c-4d3e-8f40-5a6b7c8d9e02',
      race: '6a0c8f0e-1b2c-4d3e-8f40-5a6b7c8d9e03',
    };
    async function story(on: boolean) {
      const gw = await gateway({ SQLITE_CLAIM_WITHOUT_SYNC: String(on) });
      const answers: unknown[] = [];
      const project = await gw.graphql(M.project, { input: { name: 'p' }, key: keys.project });
      answers.push(project);
      // The same request again (a replay), then another request with the key (refused).
      answers.push(await gw.graphql(M.project, { input: { name: 'p' }, key: keys.project }));
      answers.push(await gw.graphql(M.project, { input: { name: 'other' }, key: keys.project }));
      const projectId = project.data!.createProject.project.id as string;
      answers.push(await gw.graphql(M.network, { input: { projectId, title: 'n' }, key: keys.network }));
      // Concurrent requests with one key: one upstream call, the others wait and replay.
      const race = await Promise.all(
        Array.from({ length: 3 }, () => gw.graphql(M.project, { input: { name: 'race' }, key: keys.race })),
      );
      answers.push(race.map((r) => r.data!.createProject.replayed).sort());
      answers.push(race.map((r) => ({ ...r, data: { createProject: { ...r.data!.createProject, replayed: null } } })));
      const rows = await gw.gateway.services.store.db
        .selectFrom('idempotency_records')
        .select(['key', 'operation', 'state', 'response'])
        .orderBy('key')
        .execute();
      const calls = gw.gateway.sandbox.cloud!.requests.map(
        (r) => `${r.method} ${r.path} ${r.headers['idempotency-key']}`,
      );
      // Upstream ids differ between the two sandboxes: each is named by its order of appearance (a stored record names
      // its resource as `ledger`); the times differ too.
      const ids = new Map<string, string>();
      const text = JSON.stringify({ answers, rows, calls }).replace(
        /"(id|projectId)":"([^"]+)"|\\"(id|projectId|ledger)\\":\\"([^"\\]+)\\"/g,
        (m, a, b, c, d) => {
          const id = (b ?? d) as string;
          if (!ids.has(id)) ids.set(id, `id-${ids.size}`);
          return m.replace(id, ids.get(id)!);
        },
      );
      return JSON.parse(text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, '<time>')) as unknown;
    }
    const on = await story(true);
    const off = await story(false);
    expect(on).toEqual(off);
  });
});
