import { randomUUID } from 'node:crypto';
import type { ExpressionBuilder, Kysely, Selectable } from 'kysely';

import type { AgentAuditTable, AgentPlanTable, Database } from './schema.js';

export type AgentPlanRow = Selectable<AgentPlanTable>;
export type AgentAuditRow = Selectable<AgentAuditTable>;

/** How long an expired plan (any status) and its audit rows are kept before they are purged. */
export const PLAN_RETENTION_MS = 7 * 24 * 3_600_000;
/**
 * Plans of one app awaiting approval or execution (every plan not finished, FINISHED_STATUSES, and not expired:
 * pending, approved, executing, unknown): at most this many…
 */
export const MAX_OPEN_PLANS_PER_APP = 100;
/** …holding at most this many stored characters (variables, document, requests, summary) together. */
export const MAX_OPEN_PLAN_CHARS_PER_APP = 4 * 1024 * 1024;

/**
 * The expiry a spent approval is stored with (a run claimed the plan: the approval covered that run alone): before
 * every clock's now. Not the moment it was spent, which a clock set back (an NTP step) or another replica's, a little
 * behind, would read as still to come, and so claim the plan and send its request again.
 */
export const SPENT_APPROVAL = 0;

/** The statuses of a plan that has ended: it ran to its end or was declined, and can never run again. */
const FINISHED_STATUSES = ['succeeded', 'failed', 'declined'];

/** What an app holds in open plans (not finished, not expired) when a new one is refused. */
export interface OpenPlans {
  readonly bound: 'count' | 'chars';
  readonly plans: number;
  readonly chars: number;
}

/**
 * An executing plan whose execution shows no sign of life since `lostBefore` (its claim, or the heartbeat of the
 * process running it): that process stopped, and the plan reads as `unknown` (src/agents/plans.ts).
 */
function lost(eb: ExpressionBuilder<Database, 'agent_plans'>, lostBefore: number) {
  return eb.and([eb('status', '=', 'executing'), eb('updated_at', '<', lostBefore)]);
}

/**
 * The SQL of agents' plans and their audit trail (the workflow is src/agents/plans.ts): plain statements over rows
 * whose secret columns the workflow has sealed already.
 */
export class AgentPlanRows {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Inserts a new plan unless its app's open plans would pass MAX_OPEN_PLANS_PER_APP or MAX_OPEN_PLAN_CHARS_PER_APP;
   * the bound is checked and the plan stored in one transaction (SQLite serialises writers; on PostgreSQL two
   * replicas may each let one more through, which the next plan sees). Null when stored, else what the app holds.
   */
  async insertWithinBounds(row: AgentPlanRow): Promise<OpenPlans | null> {
    return this.db.transaction().execute(async (trx) => {
      const open = await trx
        .selectFrom('agent_plans')
        .select((eb) => [eb.fn.countAll<number>().as('plans'), eb.fn.sum<number>('bytes').as('chars')])
        .where('owner', '=', row.owner)
        .where('status', 'not in', FINISHED_STATUSES)
        .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', row.created_at)]))
        .executeTakeFirst();
      const plans = Number(open?.plans ?? 0);
      const chars = Number(open?.chars ?? 0);
      if (plans >= MAX_OPEN_PLANS_PER_APP) return { bound: 'count', plans, chars };
      if (chars + row.bytes > MAX_OPEN_PLAN_CHARS_PER_APP) return { bound: 'chars', plans, chars };
      await trx.insertInto('agent_plans').values(row).execute();
      return null;
    });
  }

  get(id: string): Promise<AgentPlanRow | undefined> {
    return this.db.selectFrom('agent_plans').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * The plans that need an approval at `now`, newest first: pending ones, lost ones (executing, untouched since
   * `lostBefore`: their approval was spent on the run that stopped), and approved or unknown ones whose approval has
   * lapsed, none past its lifetime; of these domain sets, and of these apps (undefined: every app). With `approverOnly`
   * (MCP_APPROVAL=approver), also approved or unknown ones whose approval an agent's client gave (`approved_via` other
   * than approvePlan), which is no approval there.
   */
  async pending(o: {
    domains: readonly string[];
    apps: readonly string[] | undefined;
    now: number;
    lostBefore: number;
    limit: number;
    approverOnly: boolean;
    /** The approver's own owner scope: its own plans, which it may never approve, are left out. */
    notOwner: string;
  }): Promise<AgentPlanRow[]> {
    let q = this.db
      .selectFrom('agent_plans')
      .selectAll()
      .where((eb) =>
        eb.or([
          eb('status', '=', 'pending'),
          lost(eb, o.lostBefore),
          eb.and([
            eb('status', 'in', ['approved', 'unknown']),
            o.approverOnly
              ? eb.or([eb('approval_expires_at', '<=', o.now), eb('approved_via', '!=', 'approvePlan')])
              : eb('approval_expires_at', '<=', o.now),
          ]),
        ]),
      )
      .where('domains', 'in', o.domains)
      .where('owner', '!=', o.notOwner)
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', o.now)]));
    if (o.apps) q = q.where('app', 'in', o.apps);
    return q.orderBy('created_at', 'desc').limit(o.limit).execute();
  }

  /**
   * Gives a plan of status `from` a new approval: a pending or approved plan becomes approved, an unknown one (or a
   * lost one: executing, untouched since `lostBefore`) becomes or stays unknown (its last execution may have been
   * applied: it is never declined, only run again under the same keys). False when the plan is no longer of status
   * `from` (declined or claimed meanwhile), or, given `changedAt`, when its row changed since then (run meanwhile).
   */
  async approve(
    id: string,
    from: 'pending' | 'approved' | 'unknown',
    approval: { by: string; via: string; hash: string; expiresAt: number },
    at: number,
    lostBefore: number,
    changedAt?: number,
  ): Promise<boolean> {
    let update = this.db
      .updateTable('agent_plans')
      .set({
        status: from === 'unknown' ? 'unknown' : 'approved',
        approved_by: approval.by,
        approved_via: approval.via,
        approved_hash: approval.hash,
        approval_expires_at: approval.expiresAt,
        updated_at: at,
      })
      .where('id', '=', id)
      .where((eb) =>
        from === 'unknown'
          ? eb.or([eb('status', '=', 'unknown'), lost(eb, lostBefore)])
          : eb('status', 'in', ['pending', 'approved']),
      );
    if (changedAt !== undefined) update = update.where('updated_at', '=', changedAt);
    const result = await update.executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Marks a pending or approved plan declined; false when it is neither (an execution claimed it). */
  async decline(id: string, by: string, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('agent_plans')
      .set({
        status: 'declined',
        approved_by: by,
        approved_via: 'approvePlan',
        approved_hash: null,
        approval_expires_at: null,
        updated_at: at,
      })
      .where('id', '=', id)
      .where('status', 'in', ['pending', 'approved'])
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * Marks an approved (or unknown) plan, within its lifetime, whose approval (the one expiring at `approvalExpiresAt`)
   * holds at `at`, executing, and spends that approval (SPENT_APPROVAL): true for exactly one caller, and any later run
   * of the plan needs a new approval. A lost plan (executing, untouched since its run stopped) is never claimed: it is
   * approved again first (approve), which makes it unknown. One conditional update: SQLite serialises writers, and on
   * PostgreSQL a second replica's update waits for the first's, then checks the row as the first left it (claimed,
   * its approval spent), which no longer matches.
   */
  async claim(id: string, at: number, approvalExpiresAt: number): Promise<boolean> {
    const result = await this.db
      .updateTable('agent_plans')
      .set({ status: 'executing', approval_expires_at: SPENT_APPROVAL, updated_at: at })
      .where('id', '=', id)
      .where('status', 'in', ['approved', 'unknown'])
      .where('approval_expires_at', '=', approvalExpiresAt)
      .where('approval_expires_at', '>', at)
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', at)]))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * The heartbeat of an execution: an executing plan touched at `at` is not taken for lost. Only while the row is as
   * this execution last wrote it (at `since`: its claim or its last heartbeat); false when another call took the
   * plan over meanwhile (this execution taken for lost), whose claim is left as it is.
   */
  async touch(id: string, since: number, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('agent_plans')
      .set({ updated_at: at })
      .where('id', '=', id)
      .where('status', '=', 'executing')
      .where('updated_at', '=', since)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * Gives a claim back: an executing plan, as its execution last wrote it (at `since`), is `to` again (approved, or
   * unknown), with the approval its claim spent (expiring at `approvalExpiresAt`) given back. One conditional update,
   * as the claim is: false when another call took the plan over.
   */
  async release(
    id: string,
    to: 'approved' | 'unknown',
    since: number,
    at: number,
    approvalExpiresAt: number,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('agent_plans')
      .set({ status: to, approval_expires_at: approvalExpiresAt, updated_at: at })
      .where('id', '=', id)
      .where('status', '=', 'executing')
      .where('updated_at', '=', since)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * Stores an execution's outcome: an executing plan, as its execution last wrote it (at `since`), ends as `status`
   * (its approval was spent by the claim). One conditional update, as the release is: false when another call took the
   * plan over.
   */
  async finish(id: string, status: string, outcome: string, since: number, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('agent_plans')
      .set({ status, outcome, updated_at: at })
      .where('id', '=', id)
      .where('status', '=', 'executing')
      .where('updated_at', '=', since)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** The plan's newest audit row's action and detail. */
  lastAudit(planId: string): Promise<Pick<AgentAuditRow, 'action' | 'detail'> | undefined> {
    return this.db
      .selectFrom('agent_audit')
      .select(['action', 'detail'])
      .where('plan_id', '=', planId)
      .orderBy('at', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  async insertAudit(row: Omit<AgentAuditRow, 'id'>): Promise<void> {
    await this.db
      .insertInto('agent_audit')
      .values({ id: randomUUID(), ...row })
      .execute();
  }

  /** Deletes the plans expired more than PLAN_RETENTION_MS before `now`, with their audit rows; how many went. */
  async purgeExpired(now: number): Promise<number> {
    const before = now - PLAN_RETENTION_MS;
    const gone = this.db.selectFrom('agent_plans').select('id').where('expires_at', '<', before);
    await this.db.deleteFrom('agent_audit').where('plan_id', 'in', gone).execute();
    const deleted = await this.db.deleteFrom('agent_plans').where('expires_at', '<', before).executeTakeFirst();
    return Number(deleted.numDeletedRows);
  }

  /**
   * The stored plans by state (`unknown` includes the lost ones, executing and untouched since `lostBefore`;
   * `expired`: pending, approved or unknown past their lifetime at `now`).
   */
  async countByState(now: number, lostBefore: number): Promise<Map<string, number>> {
    const rows = await this.db
      .selectFrom('agent_plans')
      .select((eb) => [
        'status',
        eb.case().when(lost(eb, lostBefore)).then(1).else(0).end().as('lost'),
        eb
          .case()
          .when(
            eb.and([
              eb('expires_at', '<=', now),
              eb.or([eb('status', 'in', ['pending', 'approved', 'unknown']), lost(eb, lostBefore)]),
            ]),
          )
          .then(1)
          .else(0)
          .end()
          .as('expired'),
        eb.fn.countAll<number>().as('plans'),
      ])
      .groupBy(['status', 'lost', 'expired'])
      .execute();
    const counts = new Map<string, number>();
    for (const r of rows) {
      const state = Number(r.expired) === 1 ? 'expired' : Number(r.lost) === 1 ? 'unknown' : r.status;
      counts.set(state, (counts.get(state) ?? 0) + Number(r.plans));
    }
    return counts;
  }

  /** The audit trail, newest first; of one plan when `planId` is given. */
  auditTrail(planId: string | undefined, limit: number): Promise<AgentAuditRow[]> {
    let q = this.db.selectFrom('agent_audit').selectAll();
    if (planId !== undefined) q = q.where('plan_id', '=', planId);
    return q.orderBy('at', 'desc').orderBy('id').limit(limit).execute();
  }
}
