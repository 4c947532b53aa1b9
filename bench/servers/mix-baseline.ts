/**
 * The realistic mix's floor (bench scenario 7's work written by hand): what a mobile-ID notification and its one
 * waiting subscriber cost with nothing but `node:http`, `ws`, `better-sqlite3` and `node:crypto`, doing the durable
 * work the gateway does for them (src/mobile-id/intake.ts, src/events/log.ts, src/server/ws-protocol.ts):
 *
 * - `POST /webhooks/mobile-id`: the bearer token checked against the configured one's SHA-256 in constant time; the
 *   body read (at most 64 KiB) and parsed; `auth_req_id` checked; a positive notification needs `access_token` and
 *   `id_token`, whose payload is decoded for its `sub` (not verified: no JWKS, as the bench's gateway); both tokens
 *   sealed in one AES-256-GCM seal bound to the auth_req_id; a keyed fingerprint (HMAC-SHA256 of the body) tells a
 *   repeat from a conflict; one insert into the event log (its own SQLite file: WAL, the gateway's unique index); the
 *   204 only once the insert is durable (group commit per turn of the event loop, the WAL fdatasynced on libuv's pool,
 *   as the gateway's SQLITE_SYNCHRONOUS=FULL does); then the event goes to its waiting subscribers.
 * - graphql-transport-ws on `/graphql` (the subprotocol checked, `connection_init` with the API key, `ping`, `pong`,
 *   `subscribe`, `complete`, and the close codes of the cases the mix can meet): a subscription names the one
 *   operation this server knows (the mix's query, by its text) and its `authReqId`; it is registered under that key,
 *   then the event log is read for an event that came before it (delivered once durable). A delivery is the `next`
 *   (`data` as the gateway answers the mix's selection, with a sealed cursor in `extensions`: an HMAC and an AES-CTR
 *   pass, as the gateway's) and the `complete`, in one write to the socket; the subscription then ends.
 * - Every connection is pinged every 12 s, spread over the interval (as the gateway's keep-alive sweep), and one whose
 *   pong does not come by the next round is terminated.
 *
 * No GraphQL, no validation library, no logging, no metrics, no tracing, no rate limits or budgets, no tenancy: the
 * floor the gateway's mix is measured against (bench/experiments/mix-cpu.ts `--b-baseline`), as
 * bench/servers/durable-baseline.ts is for a creation.
 */
import {
  createCipheriv,
  createHash,
  createHmac,
  randomBytes,
  randomFillSync,
  timingSafeEqual,
  type BinaryLike,
} from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { WebSocketServer, type WebSocket } from 'ws';

import { SUBSCRIPTION as MIX_SUBSCRIPTION } from '../scenarios/fanout.js';

export interface MixBaselineOptions {
  dataDir: string;
  /** The API key a graphql-ws connection's `connection_init` (or its upgrade request) must carry as a bearer token. */
  apiKey: string;
  /** The client_notification_token the webhook must carry. */
  notificationToken: string;
  /** The one subscription document this server serves (the mix's), by its text. */
  query: string;
}

export interface MixBaseline {
  url: string;
  /** Subscriptions waiting for their event. */
  subscribers(): number;
  close(): Promise<void>;
}

const KEEP_ALIVE_MS = 12_000;
const KEEP_ALIVE_SLOTS = 120;
const MAX_BODY = 64 * 1024;

interface Subscription {
  readonly connection: Connection;
  readonly id: string;
  readonly key: string;
}

/** What the log holds for a notification (its payload column's JSON). */
interface StoredEvent {
  outcome: 'success' | 'failure';
  authReqId: string;
  subject: string | null;
  reason?: string | null;
  correlationId: string | null;
  [more: string]: unknown;
}

interface Connection {
  readonly ws: WebSocket;
  readonly raw: Duplex;
  acknowledged: boolean;
  alive: boolean;
  readonly subscriptions: Map<string, Subscription>;
}

export async function startMixBaseline(options: MixBaselineOptions): Promise<MixBaseline> {
  const tokenDigest = sha256(options.notificationToken);
  const apiKeyAuth = `Bearer ${options.apiKey}`;
  const secret = randomBytes(32);
  const sealKey = hkdf(secret, 'seal');
  const macKey = hkdf(secret, 'fingerprint');
  const cursorMacKey = hkdf(secret, 'cursor mac');
  const cursorKey = hkdf(secret, 'cursor').subarray(0, 16);

  // The event log: the gateway's table and unique index (src/store/migrations.ts), WAL, synced by hand.
  const db = new SQLite(path.join(options.dataDir, 'mix-baseline.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // The WAL is copied into the database by a worker thread of its own (PASSIVE, every 500 ms), as the gateway's
  // checkpointer does (src/store/checkpoint-worker.ts): an automatic checkpoint would copy it and fsync the database
  // on the event loop, inside a COMMIT, stalling every delivery behind it.
  db.pragma('wal_autocheckpoint = 0');
  db.exec(`
    create table if not exists events (
      seq integer primary key autoincrement, kind text not null, key text not null, dedupe_key text not null,
      fingerprint text not null, payload text not null, received_at bigint not null, expires_at bigint not null);
    create unique index if not exists events_kind_key_dedupe on events (kind, key, dedupe_key);
    create index if not exists events_expires on events (expires_at);
  `);
  const checkpointer = new Worker(CHECKPOINTER, {
    eval: true,
    workerData: { file: db.name, driver: createRequire(import.meta.url).resolve('better-sqlite3') },
  });
  checkpointer.unref();
  const insert = db.prepare(
    `insert into events (kind, key, dedupe_key, fingerprint, payload, received_at, expires_at)
     values ('mobile-id', ?, ?, ?, ?, ?, ?) on conflict (kind, key, dedupe_key) do nothing`,
  );
  const byDedupeKey = db.prepare<[string, string], { fingerprint: string }>(
    `select fingerprint from events where kind = 'mobile-id' and key = ? and dedupe_key = ?`,
  );
  const newest = db.prepare<[string], { seq: number; payload: string; received_at: number }>(
    `select seq, payload, received_at from events
     where seq = (select max(seq) from events where kind = 'mobile-id' and key = ?)`,
  );

  // Group commit: the writes of a turn share one COMMIT; each is settled once the fdatasync after it returned. Writes
  // that come during a sync wait for its end and share the next COMMIT and sync.
  const walFd = () => (fd ??= fs.openSync(`${db.name}-wal`, 'r'));
  let fd: number | null = null;
  let group: Array<() => void> | null = null;
  let syncing = false;
  /** Waiting for the sync in flight to end (a read that may have seen a write of its commit). */
  let afterSync: Array<() => void> = [];
  const commit = (): void => {
    const waiting = group;
    if (waiting === null || syncing) return;
    group = null;
    db.exec('commit');
    syncing = true;
    fs.fdatasync(walFd(), (error) => {
      syncing = false;
      if (error) throw error;
      for (const settle of waiting) settle();
      const after = afterSync;
      afterSync = [];
      for (const settle of after) settle();
      if (group !== null) setImmediate(commit);
    });
  };
  const durably = <T>(work: () => T): Promise<T> => {
    if (group === null) {
      db.exec('begin immediate');
      group = [];
      setImmediate(commit);
    }
    const waiting = group;
    const result = work();
    return new Promise<T>((resolve) => waiting.push(() => resolve(result)));
  };
  /**
   * Runs `then` once what a read may have seen is durable: after the open group's sync (its uncommitted writes are
   * visible to the read), else after the sync in flight, else now.
   */
  const whenDurable = (then: () => void): void => {
    if (group !== null) group.push(then);
    else if (syncing) afterSync.push(then);
    else then();
  };

  const waiting = new Map<string, Subscription[]>();
  let count = 0;

  const seal = (plain: string, context: string): string => {
    const iv = randomFillSync(Buffer.allocUnsafe(12));
    const cipher = createCipheriv('aes-256-gcm', sealKey, iv);
    cipher.setAAD(Buffer.from(context));
    const ct = cipher.update(plain, 'utf8');
    cipher.final();
    return `${iv.toString('base64url')}.${ct.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}`;
  };
  const cursorOf = (seq: number, at: number): string => {
    const plain = Buffer.allocUnsafe(14);
    plain.writeBigUInt64BE(BigInt(seq), 0);
    plain.writeUIntBE(at, 8, 6);
    const iv = createHmac('sha256', cursorMacKey).update(plain).digest().subarray(0, 16);
    const cipher = createCipheriv('aes-128-ctr', cursorKey, iv);
    return Buffer.concat([iv, cipher.update(plain)]).toString('base64url');
  };

  /**
   * The `next` and the `complete` of one subscription, in one write to its socket; the subscription then ends. `event`
   * is the stored payload: the object the webhook built, or a stored row's parsed.
   */
  const deliver = (sub: Subscription, event: StoredEvent, seq: number, receivedAt: number): void => {
    const { connection, id } = sub;
    unregister(sub);
    const ws = connection.ws;
    if (ws.readyState !== ws.OPEN) return;
    const view =
      event.outcome === 'success'
        ? { authReqId: event.authReqId, subject: event.subject, correlationId: event.correlationId }
        : { authReqId: event.authReqId, reason: event.reason, correlationId: event.correlationId };
    const payload = {
      data: { mobileIdAuthentication: { ...view, receivedAt: new Date(receivedAt).toISOString() } },
      extensions: { cursor: cursorOf(seq, receivedAt) },
    };
    connection.raw.cork();
    ws.send(JSON.stringify({ id, type: 'next', payload }));
    ws.send(`{"id":${JSON.stringify(id)},"type":"complete"}`);
    process.nextTick(() => connection.raw.uncork());
  };

  const unregister = (sub: Subscription): void => {
    if (sub.connection.subscriptions.get(sub.id) !== sub) return;
    sub.connection.subscriptions.delete(sub.id);
    const list = waiting.get(sub.key);
    if (list === undefined) return;
    const at = list.indexOf(sub);
    if (at >= 0) {
      list.splice(at, 1);
      count--;
    }
    if (list.length === 0) waiting.delete(sub.key);
  };

  const webhook = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const auth = req.headers.authorization;
    const token = auth?.startsWith('Bearer ') ? auth.slice(7) : '';
    if (!timingSafeEqual(sha256(token), tokenDigest)) return answer(res, 401, 'invalid_token');
    const text = await readBody(req);
    if (text === null) return answer(res, 413, 'payload too large');
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return answer(res, 400, 'the body is not JSON');
    }
    if (typeof body !== 'object' || body === null) return answer(res, 400, 'the body is not an object');
    const key = body.auth_req_id;
    if (typeof key !== 'string' || key.length === 0 || key.length > 256) return answer(res, 400, 'auth_req_id');
    const correlationId = typeof body.correlation_id === 'string' ? body.correlation_id : null;
    let stored: StoredEvent;
    if (typeof body.error === 'string') {
      stored = { outcome: 'failure', authReqId: key, reason: body.error, subject: null, correlationId };
    } else {
      const { access_token: accessToken, id_token: idToken } = body;
      if (typeof accessToken !== 'string' || typeof idToken !== 'string') return answer(res, 400, 'tokens');
      let subject: string | null;
      try {
        const claims = JSON.parse(Buffer.from(idToken.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
          sub?: unknown;
        };
        subject = typeof claims.sub === 'string' ? claims.sub : null;
      } catch {
        return answer(res, 400, 'id_token is not a JWS');
      }
      stored = {
        outcome: 'success',
        authReqId: key,
        subject,
        correlationId,
        tokenType: body.token_type ?? null,
        expiresIn: body.expires_in ?? null,
        sealed: seal(JSON.stringify({ accessToken, idToken }), `mobile-id\u0000${key}`),
      };
    }
    const fingerprint = createHmac('sha256', macKey).update(text).digest('hex');
    const payload = JSON.stringify(stored);
    const now = Date.now();
    const dedupeKey = `mobile-id:${key}`;
    const outcome = await durably(() => {
      const run = insert.run(key, dedupeKey, fingerprint, payload, now, now + 86_400_000);
      if (run.changes === 1) return Number(run.lastInsertRowid);
      return byDedupeKey.get(key, dedupeKey)?.fingerprint === fingerprint ? 'duplicate' : 'conflict';
    });
    if (outcome === 'conflict') return answer(res, 409, 'conflict');
    res.writeHead(204);
    res.end();
    if (outcome === 'duplicate') return;
    const subs = waiting.get(key);
    if (subs === undefined) return;
    for (const sub of [...subs]) deliver(sub, stored, outcome, now);
  };

  const server = http.createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/webhooks/mobile-id') return answer(res, 404, 'not found');
    webhook(req, res).catch((err: unknown) => {
      if (!res.headersSent) answer(res, 500, err instanceof Error ? err.message : String(err));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;

  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: 1024 * 1024,
    handleProtocols: (protocols) => (protocols.has('graphql-transport-ws') ? 'graphql-transport-ws' : false),
  });
  const slots: Array<Set<Connection>> = Array.from({ length: KEEP_ALIVE_SLOTS }, () => new Set());
  let slot = 0;
  const sweep = setInterval(() => {
    slot = (slot + 1) % KEEP_ALIVE_SLOTS;
    for (const connection of slots[slot]!) {
      if (!connection.alive) {
        connection.ws.terminate();
        continue;
      }
      connection.alive = false;
      connection.ws.ping();
    }
  }, KEEP_ALIVE_MS / KEEP_ALIVE_SLOTS);

  const onMessage = (connection: Connection, data: string, request: http.IncomingMessage): void => {
    const ws = connection.ws;
    let message: { type?: unknown; id?: unknown; payload?: unknown };
    try {
      message = JSON.parse(data) as typeof message;
    } catch {
      return ws.close(4400, 'Invalid message received');
    }
    switch (message.type) {
      case 'connection_init': {
        const params = message.payload as { authorization?: unknown } | undefined;
        const header = request.headers.authorization ?? params?.authorization;
        if (header !== apiKeyAuth) return ws.close(4403, 'Forbidden');
        connection.acknowledged = true;
        return ws.send('{"type":"connection_ack"}');
      }
      case 'ping':
        return ws.send('{"type":"pong"}');
      case 'pong':
        return;
      case 'subscribe': {
        if (!connection.acknowledged) return ws.close(4401, 'Unauthorized');
        const id = message.id;
        if (typeof id !== 'string') return ws.close(4400, 'Invalid message received');
        if (connection.subscriptions.has(id)) return ws.close(4409, `Subscriber for ${id} already exists`);
        const payload = message.payload as { query?: unknown; variables?: { authReqId?: unknown } } | undefined;
        const key = payload?.variables?.authReqId;
        if (payload?.query !== options.query || typeof key !== 'string') {
          ws.send(JSON.stringify({ id, type: 'error', payload: [{ message: 'unknown operation or authReqId' }] }));
          return;
        }
        const sub: Subscription = { connection, id, key };
        connection.subscriptions.set(id, sub);
        const list = waiting.get(key);
        if (list === undefined) waiting.set(key, [sub]);
        else list.push(sub);
        count++;
        // Listening first, then the log: an event stored before the subscription is delivered from there.
        const row = newest.get(key);
        if (row !== undefined)
          whenDurable(() => deliver(sub, JSON.parse(row.payload) as StoredEvent, row.seq, row.received_at));
        return;
      }
      case 'complete': {
        const sub = typeof message.id === 'string' ? connection.subscriptions.get(message.id) : undefined;
        if (sub) unregister(sub);
        return;
      }
      default:
        return ws.close(4400, 'Invalid message received');
    }
  };

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if (req.url !== '/graphql') return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => {
      const connection: Connection = { ws, raw: socket, acknowledged: false, alive: true, subscriptions: new Map() };
      if (ws.protocol !== 'graphql-transport-ws') return ws.close(4406, 'Subprotocol not acceptable');
      const own = slots[Math.floor(Math.random() * KEEP_ALIVE_SLOTS)]!;
      own.add(connection);
      ws.on('pong', () => (connection.alive = true));
      ws.on('message', (data) => onMessage(connection, String(data), req));
      ws.on('error', () => ws.terminate());
      ws.once('close', () => {
        own.delete(connection);
        for (const sub of [...connection.subscriptions.values()]) unregister(sub);
      });
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    subscribers: () => count,
    async close() {
      clearInterval(sweep);
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      while (group !== null || syncing) await new Promise((r) => setTimeout(r, 5));
      await checkpointer.terminate();
      if (fd !== null) fs.closeSync(fd);
      db.close();
    },
  };
}

/** The checkpoint worker (CommonJS, evaluated): its own connection, a PASSIVE checkpoint every 500 ms. */
const CHECKPOINTER = `
const { workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = 5000');
setInterval(() => db.pragma('wal_checkpoint(PASSIVE)'), 500);
`;

function sha256(text: BinaryLike): Buffer {
  return createHash('sha256').update(text).digest();
}

function hkdf(secret: Buffer, info: string): Buffer {
  return createHmac('sha256', secret).update(info).digest();
}

function answer(res: http.ServerResponse, status: number, message: string): void {
  const text = JSON.stringify({ error: message });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The body as text, or null when it is longer than MAX_BODY. */
function readBody(req: http.IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    req.on('data', (c: Buffer) => {
      length += c.length;
      if (length <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => resolve(length > MAX_BODY ? null : Buffer.concat(chunks, length).toString('utf8')));
    req.on('error', reject);
  });
}

/**
 * As a process (scenario 7's floor, bench/scenarios/mix.ts):
 *   node --import tsx bench/servers/mix-baseline.ts --data-dir <dir> --api-key <k> --token <t>
 * prints `READY {"url": ...}` for bench/lib/processes.ts, and closes on SIGTERM.
 */
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values: args } = parseArgs({
    options: { 'data-dir': { type: 'string' }, 'api-key': { type: 'string' }, token: { type: 'string' } },
  });
  const floor = await startMixBaseline({
    dataDir: args['data-dir']!,
    apiKey: args['api-key']!,
    notificationToken: args.token!,
    query: MIX_SUBSCRIPTION,
  });
  process.stdout.write(`READY ${JSON.stringify({ url: floor.url })}\n`);
  process.on('SIGTERM', () => void floor.close().finally(() => process.exit(0)));
}
