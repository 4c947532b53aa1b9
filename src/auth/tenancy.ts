import type { Expression, ExpressionBuilder, SqlBool, StringReference } from 'kysely';

import type { LedgerRecord, ResourceKind } from '../store/ledger.js';
import type { Caller } from './caller.js';
import type { AuthResult } from './keys.js';

/**
 * Tenancy (docs/contract.md, docs/decisions/010): each API key is one app, and what an app created that holds personal
 * data is readable by that app alone. Everything stored carries the scope of the caller that created it
 * (its owner): `resources.created_by`, `events.scope`, `provisionings.scope`, `notification_tokens.created_by`,
 * `verification_callbacks.created_by`. Every read of such a thing goes through `readableBy` (in SQL,
 * `readableByInSql`); a thing another key owns is answered exactly as one that does not exist (null, the same
 * NOT_FOUND text, no event).
 *
 * An owner of `null` means shared: the cloud ledger (one cloud account behind the gateway, so every key of
 * the gateway sees every project, network, ...), and mobile-ID notifications that arrived on a token the
 * operator configured (MOBILEID_NOTIFICATION_TOKENS) rather than one an app issued.
 */
export type Owner = string | null;

/** Ledger kinds that belong to the key that created them; every other kind is the shared cloud ledger. */
export const OWNED_KINDS: ReadonlySet<ResourceKind> = new Set<ResourceKind>(['identification', 'verification']);

/** True when `caller` may read a thing whose owner is `owner`. */
export function readableBy(caller: Caller, owner: Owner): boolean {
  return owner === null || owner === caller.scope;
}

/**
 * readableBy in SQL, for a query's WHERE: the rows whose owner (the column `owner`) `caller` may read, its own and the
 * shared ones (a null owner). Every query that filters rows by their reader builds its predicate here.
 */
export function readableByInSql<DB, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  owner: StringReference<DB, TB>,
  caller: Pick<Caller, 'scope'>,
): Expression<SqlBool> {
  const column = eb.ref(owner).$castTo<string | null>();
  return eb.or([eb(column, '=', caller.scope), eb(column, 'is', null)]);
}

/**
 * A credential authenticated again (after a reload) for what it opened as `opened`: a connection, a stream, a wait.
 * What it opened reads what `opened` owns, so a credential the reload gave to another app is refused for it, as one
 * the reload removed; a new request with it is that other app's.
 */
export function reauthenticatedFor(opened: Caller, again: AuthResult): AuthResult {
  if (!again.ok || readableBy(again.caller, opened.scope)) return again;
  return { ok: false, reason: 'invalid', message: "the credential is now another app's" };
}

/** The owner of a ledger record: its creator for identity kinds, nobody (shared) for the cloud ledger. */
export function ownerOfRecord(record: Pick<LedgerRecord, 'kind' | 'createdBy'>): Owner {
  return OWNED_KINDS.has(record.kind) ? record.createdBy : null;
}

/** The record when `caller` may read it, else null (as for an id that does not exist). */
export function visibleRecord<T extends Pick<LedgerRecord, 'kind' | 'createdBy'>>(
  caller: Caller,
  record: T | null | undefined,
): T | null {
  return record && readableBy(caller, ownerOfRecord(record)) ? record : null;
}

/**
 * The record when it belongs to the shared cloud ledger, else null: what cloud validation, provisioning and plans
 * see of an id. Another app's verification or identification reads as unknown there, word for word, never as "a
 * verification, not an IP address" (which would tell the caller that the id exists).
 */
export function cloudLedgerRecord<T extends Pick<LedgerRecord, 'kind' | 'createdBy'>>(
  record: T | null | undefined,
): T | null {
  return record && ownerOfRecord(record) === null ? record : null;
}
