/**
 * The durable baseline: the physical limit of a durable `createNetwork` on this machine. Nothing but
 * `node:http`, `better-sqlite3` and `undici`, doing the SQLite work the gateway does for a mutation
 * (src/cloud/service.ts, src/upstream/idempotency.ts, src/store/idempotency.ts, src/store/ledger.ts):
 *
 * 1. the project lookup in the ledger (one prepared read);
 * 2. the idempotency claim: one upsert that inserts the pending record (or replaces an expired one), committed
 *    before the upstream call; as the gateway does by default (SQLITE_CLAIM_WITHOUT_SYNC, docs/decisions/078), its
 *    WAL sync is left to the completion's, unless `--claim-sync durable` (the gateway's switch off);
 * 3. the upstream call: POST /ocs/v1/services to the same stub with the bearer token and the
 *    Idempotency-Key (derived from scope and key like the gateway's `upstreamKey`), over `undici.request`;
 * 4. the ledger row and the completed idempotency record, then the same JSON answer as the gateway; the record keeps
 *    the network's id, as the gateway's does by default (IDEMPOTENCY_REPLAY_FROM_LEDGER, docs/decisions/143), unless
 *    `--completion copy` (the gateway's switch off: a copy of the ledger record).
 *
 * Its own SQLite file, the same two tables with the same indexes as the gateway's migrations, WAL,
 * `synchronous=FULL` (or NORMAL). With FULL and the claim settled at its COMMIT, the connection runs NORMAL and
 * the WAL is fdatasynced after each COMMIT that anything but claims waits for, before those are settled (what
 * FULL does at every COMMIT; the gateway does the same off the event loop). Group commit as in src/store/sqlite-dialect.ts: the first write of a
 * turn of the event loop opens a transaction, every write of that turn joins it, one COMMIT at the end of
 * the turn (setImmediate), and each request goes on only after its turn's COMMIT. The ledger row and the
 * completion are written in the same turn, so they share one commit: two commits per request, each
 * shared by every request of its turn. No GraphQL, no validation library, no logging, no lease timer.
 *
 * `POST /seed` (setup only, not measured) inserts the project the mutation body names, since this file
 * does not share the gateway's ledger.
 *
 * Usage: node --import tsx bench/servers/durable-baseline.ts --upstream <url> --token <t> --api-key <k>
 *        --data-dir <dir> [--synchronous FULL|NORMAL] [--claim-sync commit|durable] [--completion id|copy]
 */
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import SQLite from 'better-sqlite3';
import { Pool } from 'undici';
import { v5 as uuidv5 } from 'uuid';

import { readBody, sendJson, serveRoutes, type Route } from './http.js';

const { values: args } = parseArgs({
  options: {
    upstream: { type: 'string' },
    token: { type: 'string' },
    'api-key': { type: 'string' },
    'data-dir': { type: 'string' },
    synchronous: { type: 'string', default: 'FULL' },
    'claim-sync': { type: 'string', default: 'commit' },
    completion: { type: 'string', default: 'id' },
  },
});

const upstreamAuth = `Bearer ${args.token!}`;
const callerAuth = `Bearer ${args['api-key']!}`;
/** The caller's idempotency scope, derived from the API key as src/auth/caller.ts does. */
const scope = `key:${createHash('sha256').update(args['api-key']!).digest('hex').slice(0, 16)}`;
/** Same namespace as src/upstream/idempotency.ts `upstreamKey`. */
const UPSTREAM_NAMESPACE = 'b3c1e0b4-6a43-5d0e-9f5a-2d7c4e8a1f60';
const RETENTION_MS = 24 * 3600_000;
const LEASE_MS = 30_000;
const pool = new Pool(args.upstream!, { connections: 64, pipelining: 1, keepAliveTimeout: 30_000 });

const db = new SQLite(path.join(args['data-dir']!, 'durable-baseline.sqlite'));
db.pragma('journal_mode = WAL');
const full = args.synchronous !== 'NORMAL';
if (args['claim-sync'] !== 'commit' && args['claim-sync'] !== 'durable')
  throw new Error(`--claim-sync wants commit or durable, got ${JSON.stringify(args['claim-sync'])}`);
if (args.completion !== 'id' && args.completion !== 'copy')
  throw new Error(`--completion wants id or copy, got ${JSON.stringify(args.completion)}`);
/** FULL with claims settled at their COMMIT: NORMAL on the connection, and the WAL synced here when a write needs it. */
const syncByHand = full && args['claim-sync'] === 'commit';
db.pragma(`synchronous = ${full && !syncByHand ? 'FULL' : 'NORMAL'}`);
let walFd: number | null = null;
db.exec(`
  create table if not exists idempotency_records (
    scope text not null, key text not null, operation text not null, fingerprint text not null, state text not null,
    response text, lease_until bigint not null, created_at bigint not null, expires_at bigint not null,
    constraint idempotency_records_pk primary key (scope, key));
  create index if not exists idempotency_records_expires on idempotency_records (expires_at);
  create table if not exists resources (
    id text primary key, kind text not null, project_id text, parent_id text, title text, spec text not null,
    response text not null, idempotency_key text, created_by text not null, created_at bigint not null);
  create index if not exists resources_parent on resources (parent_id, kind, created_at, id);
  create index if not exists resources_project on resources (project_id, kind, created_at, id);
  create index if not exists resources_kind on resources (kind, created_at);
`);

const findProject = db.prepare<[string], { id: string }>(`select id from resources where id = ? and kind = 'project'`);
const claim = db.prepare(
  `insert into idempotency_records (scope, key, operation, fingerprint, state, response, lease_until, created_at, expires_at)
   values (?, ?, 'createNetwork', ?, 'pending', null, ?, ?, ?)
   on conflict (scope, key) do update set operation = excluded.operation, fingerprint = excluded.fingerprint, state = 'pending',
     response = null, lease_until = excluded.lease_until, created_at = excluded.created_at, expires_at = excluded.expires_at
   where idempotency_records.expires_at <= ?`,
);
const recordResource = db.prepare(
  `insert into resources (id, kind, project_id, parent_id, title, spec, response, idempotency_key, created_by, created_at)
   values (?, 'network', ?, null, ?, ?, ?, ?, ?, ?) on conflict (id) do nothing`,
);
const complete = db.prepare(`update idempotency_records set state = 'done', response = ? where scope = ? and key = ?`);
const release = db.prepare(`delete from idempotency_records where scope = ? and key = ? and state = 'pending'`);
const seedProject = db.prepare(
  `insert into resources (id, kind, project_id, parent_id, title, spec, response, idempotency_key, created_by, created_at)
   values (?, 'project', ?, null, 'bench', '{}', '{}', null, ?, ?) on conflict (id) do nothing`,
);

/** Group commit: writes of this turn, settled after the turn's COMMIT (and its sync, unless all are claims). */
let group: Array<{ resolve: () => void; reject: (e: unknown) => void }> | null = null;
let groupNeedsSync = false;

function flush(): void {
  const waiting = group;
  if (!waiting) return;
  group = null;
  const needsSync = groupNeedsSync;
  groupNeedsSync = false;
  try {
    db.exec('commit');
    if (syncByHand && needsSync) fs.fdatasyncSync((walFd ??= fs.openSync(`${db.name}-wal`, 'r')));
  } catch (error) {
    if (db.inTransaction) db.exec('rollback');
    for (const w of waiting) w.reject(error);
    return;
  }
  for (const w of waiting) w.resolve();
}

/**
 * Runs `work` (synchronous writes) in this turn's transaction; resolves after its COMMIT and the sync that makes it
 * durable, or with `claim` after the COMMIT alone when claims are settled there (the next sync covers it).
 */
function durably<T>(work: () => T, claim = false): Promise<T> {
  if (!claim) groupNeedsSync = true;
  if (!group) {
    db.exec('begin immediate');
    group = [];
    setImmediate(flush);
  }
  const waiting = group;
  const result = work();
  return new Promise<T>((resolve, reject) => waiting.push({ resolve: () => resolve(result), reject }));
}

function graphqlError(res: http.ServerResponse, code: string, message: string): void {
  sendJson(res, 200, {
    data: { createNetwork: null },
    errors: [{ message, path: ['createNetwork'], extensions: { code } }],
  });
}

async function mutation(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  if (req.headers.authorization !== callerAuth)
    return sendJson(res, 401, { errors: [{ message: 'unauthenticated', extensions: { code: 'UNAUTHENTICATED' } }] });
  const body = JSON.parse(await readBody(req)) as { variables: { input: Record<string, any>; key?: string | null } };
  const { input } = body.variables;
  const key = body.variables.key ?? randomUUID();
  if (typeof input.projectId !== 'string' || typeof input.title !== 'string')
    return graphqlError(res, 'VALIDATION_FAILED', 'projectId and title are required');
  // A read joins this turn's open transaction (its answer may rest on another request's uncommitted write).
  if (!findProject.get(input.projectId)) return graphqlError(res, 'NOT_FOUND', `project ${input.projectId} not found`);
  const spec = {
    projectId: input.projectId,
    title: input.title,
    description: input.description ?? '',
    bandwidthMbps: input.bandwidthMbps ?? 100,
  };
  const envelope = {
    platform: { productCode: 'network', regionCode: 'msk' },
    kind: 'network',
    metadata: { title: spec.title, description: spec.description },
    projectId: spec.projectId,
    spec: { 'vendor.extensions.network': { bandwidth_mbps: spec.bandwidthMbps, default_gfw_rule_action: 'allow' } },
    zoneCode: 'msk-avntg',
  };
  const envelopeText = JSON.stringify(envelope);
  const print = createHash('sha256').update(`createNetwork\u0000/ocs/v1/services\u0000${envelopeText}`).digest('hex');
  const now = Date.now();
  const claimed = await durably(function claimKey() {
    return claim.run(scope, key, print, now + LEASE_MS, now, now + RETENTION_MS, now).changes === 1;
  }, true);
  if (!claimed) return graphqlError(res, 'IDEMPOTENCY_KEY_IN_USE', `idempotency key ${key} is taken`);
  const upstreamKey = uuidv5(`${scope}\u0000${key}`, UPSTREAM_NAMESPACE);
  let created: { id: string; metadata: { title: string } };
  try {
    const up = await pool.request({
      path: '/ocs/v1/services',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: upstreamAuth, 'idempotency-key': upstreamKey },
      body: envelopeText,
    });
    const text = await up.body.text();
    if (up.statusCode !== 201) throw new Error(`upstream answered ${up.statusCode}`);
    created = JSON.parse(text) as typeof created;
  } catch (error) {
    await durably(() => release.run(scope, key));
    return graphqlError(res, 'UPSTREAM_ERROR', error instanceof Error ? error.message : String(error));
  }
  const createdAt = Date.now();
  // What the completion keeps for a replay: the network's id, or (`--completion copy`) a copy of its ledger record.
  const stored =
    args.completion === 'id'
      ? JSON.stringify({ ledger: created.id })
      : JSON.stringify({
          id: created.id,
          kind: 'network',
          projectId: spec.projectId,
          parentId: null,
          title: spec.title,
          spec,
          response: created,
          idempotencyKey: upstreamKey,
          createdBy: scope,
          createdAt: new Date(createdAt).toISOString(),
        });
  // The ledger row and the completion in the same turn: one COMMIT makes both durable.
  await durably(function recordNetwork() {
    recordResource.run(
      created.id,
      spec.projectId,
      spec.title,
      JSON.stringify(spec),
      JSON.stringify(created),
      upstreamKey,
      scope,
      createdAt,
    );
    complete.run(stored, scope, key);
  });
  sendJson(res, 200, {
    data: {
      createNetwork: {
        network: { id: created.id, title: created.metadata.title },
        idempotencyKey: key,
        replayed: false,
      },
    },
  });
}

async function seed(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const { projectId } = JSON.parse(await readBody(req)) as { projectId: string };
  await durably(() => seedProject.run(projectId, projectId, scope, Date.now()));
  sendJson(res, 200, { seeded: projectId });
}

const routes: Record<string, Route> = { '/mutation': mutation, '/seed': seed };

serveRoutes(routes, () => {
  flush();
  db.close();
  void pool.close();
});
