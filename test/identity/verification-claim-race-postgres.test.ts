// An address not yet bound to its verification is bound by the first id a callback on it names, unless another address
// of the same app holds that id (VerificationCallbacks.claim). On PostgreSQL, under READ COMMITTED, two such claims of
// one app for one id on two addresses each read a snapshot taken before the other's update committed: unless the
// claims of an app wait for each other, both bind, and two addresses then report on one verification.
// The interleaving is made certain, without timing: a row lock held by the test stops the first claim at its update,
// after its statement has begun; the second claim then runs to its end, or waits for the first; the test then lets
// the first one go on.
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VerificationCallbacks, type CallbackBinding } from '../../src/identity/callbacks.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

describe('two unbound addresses of one app claiming one verification id on PostgreSQL', () => {
  let server: TestPostgres;
  let dir: string;
  let url: string;
  /** Two replicas' stores on one database: each claim runs on its own. */
  const stores: Store[] = [];
  const secret = { digest: (text: string) => createHmac('sha256', 'test-key').update(text).digest('hex') };

  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('verification_claim_race');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'claim-race-'));
    const logger = createLogger({ level: 'silent' });
    for (const name of ['a', 'b'])
      stores.push(await openStore({ dataDir: path.join(dir, name), databaseUrl: url, logger }));
  }, 120_000);
  afterAll(async () => {
    for (const store of stores) await store.close();
    await server?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Statements of this database waiting for a lock (a row's, or an advisory one). */
  async function waitingOnLocks(): Promise<number> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock'`,
      );
      return rows[0]!.n;
    } finally {
      await client.end();
    }
  }

  it('binds the id to one address only: the second claim waits for the first and is refused', async () => {
    const [onA, onB] = stores.map((store) => new VerificationCallbacks(store.db, store.dialect, secret));
    const unbound = async (app: string, key: string): Promise<CallbackBinding> => {
      const { token } = await onA!.issue(app, null, key);
      const binding = (await onA!.find(token))!;
      expect(binding.externalId).toBeNull();
      return binding;
    };
    const first = await unbound('app-a', 'registration-1');
    const second = await unbound('app-a', 'registration-2');
    const otherApps = await unbound('app-b', 'registration-3');
    const id = 'verification-1';

    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    let firstClaim: Promise<boolean>;
    let secondClaim: Promise<boolean>;
    try {
      await holder.query('begin');
      await holder.query('select 1 from verification_callbacks where token_hash = $1 for update', [first.tokenHash]);
      // The first claim's update has begun (its snapshot taken) and waits for the row.
      firstClaim = onA!.claim(first, id);
      await waitFor(async () => (await waitingOnLocks()) === 1, 30_000, 'the first claim to wait for its row');
      // The second claim either binds its address before the first commits, or waits for the first claim.
      let settled = false;
      secondClaim = onB!.claim(second, id);
      void secondClaim.then(
        () => (settled = true),
        () => (settled = true),
      );
      await waitFor(
        async () => settled || (await waitingOnLocks()) === 2,
        30_000,
        'the second claim to end or to wait for the first',
      );
      // Another app's address is not held up by this app's claims: its ids are its own.
      expect(await onB!.claim(otherApps, id)).toBe(true);
    } finally {
      await holder.query('commit');
      await holder.end();
    }

    const claimed = [await firstClaim, await secondClaim];
    const bound = await stores[0]!.db
      .selectFrom('verification_callbacks')
      .select('token_hash')
      .where('created_by', '=', 'app-a')
      .where('external_id', '=', id)
      .execute();
    expect(bound.map((row) => row.token_hash)).toEqual([first.tokenHash]);
    expect(claimed).toEqual([true, false]);
    expect((await onA!.find(onA!.tokenFor('registration-2')))!.externalId).toBeNull();
  }, 60_000);
});
