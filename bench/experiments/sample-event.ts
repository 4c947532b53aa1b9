/**
 * One `events` row as the event log stores a mobile-ID success (sealed tokens of the intake's sizes, a random
 * auth_req_id), in the order of the insert's columns: kind, key, dedupe_key, fingerprint, payload, meta, scope,
 * received_at, expires_at, secrets_expire_at. Shared by bench/experiments/events-one-index.ts and events-rebuild.ts.
 */
import { randomBytes, randomUUID } from 'node:crypto';

/** The table's columns as migrated, with `DEDUPE` where the inline UNIQUE on `dedupe_key` goes (or not). */
export const EVENT_COLUMNS = `seq integer primary key autoincrement, kind text not null, key text not null,
  dedupe_key text not null DEDUPE, fingerprint text not null, payload text not null, meta text not null, scope text,
  received_at bigint not null, expires_at bigint not null, secrets_expire_at bigint`;

const sealed = (bytes: number) =>
  `gcm1.abcd1234.${randomBytes(12).toString('base64url')}.${randomBytes(bytes).toString('base64url')}`;

export function sampleEventRow(): unknown[] {
  const key = randomUUID();
  const now = Date.now();
  const payload = { v: 3, outcome: 'success', authReqId: key, accessToken: sealed(20), sealedPersonal: sealed(300) };
  return [
    'mobile-id',
    key,
    `mobile-id@app:bench:${key}`,
    randomBytes(32).toString('hex'),
    JSON.stringify(payload),
    JSON.stringify({ requestId: 'bench', gatewayRequestId: randomUUID() }),
    'app:bench',
    now,
    now + 86_400_000,
    now + 3_600_000,
  ];
}

/** The same event as `EventLog.append` takes it (events-index-ab.ts, events-plans-postgres.ts). */
export function sampleAppend() {
  const [kind, key, dedupeKey, fingerprint, payload, meta, scope, , , secretsExpireAt] = sampleEventRow() as string[];
  return {
    kind: kind!,
    key: key!,
    dedupeKey: dedupeKey!,
    fingerprint: fingerprint!,
    payload: JSON.parse(payload!) as unknown,
    meta: JSON.parse(meta!) as Record<string, unknown>,
    scope: scope!,
    secretsExpireAt: Number(secretsExpireAt),
  };
}
