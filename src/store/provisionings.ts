import type { Kysely } from 'kysely';

import type { Database } from './schema.js';

export type ProvisioningRow = Database['provisionings'];

/** The SQL of composite provisionings: one row per (caller scope, key), rewritten after every step. */
export class ProvisioningRows {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts a new provisioning; false when a row with its id exists already (a concurrent call won). */
  async insert(row: ProvisioningRow): Promise<boolean> {
    const inserted = await this.db
      .insertInto('provisionings')
      .values(row)
      // No conflict target: the id is derived from (scope, key), whose unique index a concurrent insert on PostgreSQL
      // may hit first, and with `id` as the only target that conflict is an error instead of nothing inserted.
      .onConflict((oc) => oc.doNothing())
      .executeTakeFirst();
    return Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  /**
   * Stores a run's next state, only while the row is at `since` (the revision this run last wrote): false when another
   * call took the provisioning over meanwhile (its claim wrote a later revision), whose row is left as it is.
   */
  async update(row: ProvisioningRow, since: number): Promise<boolean> {
    const updated = await this.db
      .updateTable('provisionings')
      .set({ state: row.state, steps: row.steps, error: row.error, revision: row.revision, updated_at: row.updated_at })
      .where('id', '=', row.id)
      .where('revision', '=', since)
      .executeTakeFirst();
    return Number(updated.numUpdatedRows) === 1;
  }

  /**
   * Marks a running provisioning alive (its run's heartbeat), only while it is at `revision` (the one its run last
   * wrote): false when another call took it over meanwhile.
   */
  async touch(id: string, revision: number, now: number): Promise<boolean> {
    const touched = await this.db
      .updateTable('provisionings')
      .set({ updated_at: now })
      .where('id', '=', id)
      .where('revision', '=', revision)
      .where('state', '=', 'RUNNING')
      .executeTakeFirst();
    return Number(touched.numUpdatedRows) === 1;
  }

  /**
   * Claims a FAILED, or RUNNING but untouched for `staleMs`, provisioning at `revision` for resuming, by writing `row`
   * (its resumed state, touched at its `updated_at`) in the same conditional update: no reader sees the claim without
   * the resumed steps. False when another call got it.
   */
  async claimResume(row: ProvisioningRow, revision: number, staleMs: number): Promise<boolean> {
    const now = row.updated_at;
    const claimed = await this.db
      .updateTable('provisionings')
      .set({ state: row.state, steps: row.steps, error: row.error, revision: row.revision, updated_at: now })
      .where('id', '=', row.id)
      .where('revision', '=', revision)
      .where((eb) =>
        eb.or([
          eb('state', '=', 'FAILED'),
          eb.and([eb('state', '=', 'RUNNING'), eb('updated_at', '<', now - staleMs)]),
        ]),
      )
      .executeTakeFirst();
    return Number(claimed.numUpdatedRows) === 1;
  }

  async get(id: string): Promise<ProvisioningRow | null> {
    return (await this.db.selectFrom('provisionings').selectAll().where('id', '=', id).executeTakeFirst()) ?? null;
  }
}
