/**
 * What SQLite itself costs per stored notification, and what the WAL sync's hand-off to libuv's thread pool costs:
 * a gateway's own file (its migrations), better-sqlite3 alone, the event log's insert with success payloads of the
 * intake's size. Per row: the insert, the COMMIT (WAL frames written), µs of process CPU; `--drop` removes indexes
 * first to show each one's share, `--sequential` uses increasing keys instead of random ones (as auth_req_ids are).
 * The wal_autocheckpoint is off, as the gateway's (its worker checkpoints). Then fdatasync called synchronously and
 * through the thread pool (as src/store/sqlite-dialect.ts's syncWal does), µs of process CPU per call.
 *
 *   npx tsx bench/experiments/event-append.ts [--group 8] [--rows 20000] [--drop events_expires,...]
 *     [--sequential] [--dir /dev/shm]
 */
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import SQLite from 'better-sqlite3';

import { createLogger } from '../../src/logger.js';
import { openStore } from '../../src/store/index.js';

const { values: args } = parseArgs({
  options: {
    group: { type: 'string', default: '8' },
    rows: { type: 'string', default: '20000' },
    drop: { type: 'string', default: '' },
    sequential: { type: 'boolean', default: false },
    dir: { type: 'string', default: '/dev/shm' },
  },
});
const G = Number(args.group);
const N = Math.ceil(Number(args.rows) / G) * G;
const dir = fs.mkdtempSync(path.join(args.dir, 'event-append-'));
const store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
await store.close();
const db = new SQLite(path.join(dir, 'gateway.sqlite'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('wal_autocheckpoint = 0');
for (const index of args.drop.split(',').filter(Boolean)) db.exec(`drop index ${index}`);

const insert = db.prepare(
  'insert into "events" ("kind", "key", "dedupe_key", "fingerprint", "payload", "meta", "scope", "received_at", "expires_at", "secrets_expire_at") values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict ("kind", "key", "dedupe_key") do nothing returning "seq"',
);
const sealed = (bytes: number) =>
  `gcm1.abcd1234.${randomBytes(12).toString('base64url')}.${randomBytes(bytes).toString('base64url')}`;
const rows = Array.from({ length: N }, (_, i) => {
  const key = args.sequential ? String(1e12 + i) : randomUUID();
  const payload = {
    v: 2,
    outcome: 'success',
    authReqId: key,
    tokenType: 'Bearer',
    accessToken: sealed(40),
    idToken: sealed(400),
    expiresIn: 3600,
    expiresAt: Date.now() + 3_600_000,
    claims: {
      iss: 'https://mobileid.example',
      sub: null,
      aud: 'bench',
      acr: '2',
      amr: ['sim'],
      iat: 1_795_000_000,
      exp: 4_102_444_800,
    },
    sealedPersonal: sealed(40),
    verifiedWith: null,
    jwksUri: null,
    leadingKycMatch: null,
    correlationId: null,
    extra: {},
    sealedExtra: {},
    droppedExtra: null,
  };
  const meta = {
    requestId: 'bench',
    transactionId: null,
    contentType: 'application/json',
    gatewayRequestId: randomUUID(),
  };
  const now = Date.now();
  return [
    'mobile-id',
    key,
    `app:${key}`,
    randomBytes(32).toString('hex'),
    JSON.stringify(payload),
    JSON.stringify(meta),
    'app',
    now,
    now + 86_400_000,
    now + 3_600_000,
  ];
});

const begin = db.prepare('begin immediate');
const commit = db.prepare('commit');
let inserting = 0n;
let committing = 0n;
const cpu0 = process.cpuUsage();
for (let i = 0; i < N; i += G) {
  begin.run();
  const t0 = process.hrtime.bigint();
  for (let j = i; j < i + G; j++) insert.get(rows[j]);
  const t1 = process.hrtime.bigint();
  commit.run();
  committing += process.hrtime.bigint() - t1;
  inserting += t1 - t0;
}
const cpu = process.cpuUsage(cpu0);
const perRow = (ns: bigint) => (Number(ns) / 1000 / N).toFixed(1);
console.log(
  `group ${G}${args.drop ? `, without ${args.drop}` : ''}${args.sequential ? ', sequential keys' : ''}: per row insert ${perRow(inserting)} µs, commit ${perRow(committing)} µs (wall), ${((cpu.user + cpu.system) / N).toFixed(1)} µs of CPU`,
);
db.close();

const file = path.join(dir, 'sync-probe');
fs.writeFileSync(file, 'x'.repeat(4096));
const fd = fs.openSync(file, 'r+');
const CALLS = 5000;
for (const how of ['sync', 'thread pool', 'sync', 'thread pool'] as const) {
  const c0 = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) {
    fs.writeSync(fd, 'y', 0);
    if (how === 'sync') fs.fdatasyncSync(fd);
    else await new Promise<void>((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())));
  }
  const c = process.cpuUsage(c0);
  console.log(`fdatasync (${how}): ${((c.user + c.system) / CALLS).toFixed(1)} µs of CPU per call`);
}
fs.closeSync(fd);
fs.rmSync(dir, { recursive: true, force: true });
