/**
 * The baseline: what the same work costs with nothing but `node:http`, `undici.request` and
 * `better-sqlite3`. It gets the very same request bytes as the gateway and answers the same JSON.
 *
 * - `POST /mutation`: parses the GraphQL-shaped body, builds the createNetwork envelope and forwards it
 *   to the upstream with `undici.request` (same headers: bearer token, Idempotency-Key); answers the
 *   payload the gateway would. No idempotency record, no ledger.
 * - `POST /query`: answers `project(id) { networks { subnets } }` from the gateway's SQLite file
 *   (opened read-only) with one prepared statement per level.
 * - `POST /webhook`: checks the bearer token, parses the notification and inserts it into its own SQLite
 *   file (WAL, the same `synchronous` as the gateway), one commit per request, then answers 204.
 *
 * Usage: node --import tsx bench/servers/baseline.ts --upstream <url> --token <t> --gateway-db <file>
 *        --data-dir <dir> --synchronous FULL|NORMAL --notification-token <t>
 */
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import SQLite from 'better-sqlite3';
import { request } from 'undici';

import { readBody, sendJson, serveRoutes, type Route } from './http.js';

const { values: args } = parseArgs({
  options: {
    upstream: { type: 'string' },
    token: { type: 'string' },
    'gateway-db': { type: 'string' },
    'data-dir': { type: 'string' },
    synchronous: { type: 'string', default: 'FULL' },
    'notification-token': { type: 'string', default: '' },
  },
});

const upstream = args.upstream!;
const authorization = `Bearer ${args.token!}`;
const notificationAuth = `Bearer ${args['notification-token']}`;

async function mutation(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const body = JSON.parse(await readBody(req)) as { variables: { input: Record<string, any>; key: string } };
  const { input, key } = body.variables;
  const envelope = {
    platform: { productCode: 'network', regionCode: 'msk' },
    kind: 'network',
    metadata: { title: input.title, description: input.description ?? '' },
    projectId: input.projectId,
    spec: {
      'vendor.extensions.network': { bandwidth_mbps: input.bandwidthMbps ?? 100, default_gfw_rule_action: 'allow' },
    },
    zoneCode: 'msk-avntg',
  };
  const up = await request(`${upstream}/ocs/v1/services`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization, 'idempotency-key': key },
    body: JSON.stringify(envelope),
  });
  const created = (await up.body.json()) as { id: string; metadata: { title: string } };
  if (up.statusCode !== 201) {
    sendJson(res, 502, { errors: [{ message: `upstream answered ${up.statusCode}` }] });
    return;
  }
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

interface Row {
  id: string;
  title: string | null;
  spec: string;
}

let gatewayDb: SQLite.Database | null = null;
let projectStatement: SQLite.Statement<[string], Row>;
let networksStatement: SQLite.Statement<[string], Row>;
/** `parent_id in (?, ?, ...)`, one prepared statement per list length. */
const childStatements = new Map<number, SQLite.Statement>();

/** Opened on first use: the gateway creates the file before the first query scenario. */
function openGatewayDb(): SQLite.Database {
  if (!gatewayDb) {
    gatewayDb = new SQLite(args['gateway-db']!, { readonly: true, fileMustExist: true });
    projectStatement = gatewayDb.prepare(`select id, title, spec from resources where id = ? and kind = 'project'`);
    networksStatement = gatewayDb.prepare(
      `select id, title, spec from resources where kind = 'network' and project_id = ? order by created_at, id`,
    );
  }
  return gatewayDb;
}

async function query(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const body = JSON.parse(await readBody(req)) as { variables: { id: string } };
  const db = openGatewayDb();
  const project = projectStatement.get(body.variables.id);
  if (!project) {
    sendJson(res, 200, { data: { project: null } });
    return;
  }
  const networks = networksStatement.all(project.id);
  let subnetsOf = new Map<string, Array<{ id: string; cidr: string }>>();
  if (networks.length) {
    let stmt = childStatements.get(networks.length);
    if (!stmt) {
      const marks = networks.map(() => '?').join(', ');
      stmt = db.prepare(
        `select id, spec, parent_id from resources where kind = 'subnet' and parent_id in (${marks}) order by created_at, id`,
      );
      childStatements.set(networks.length, stmt);
    }
    subnetsOf = new Map(networks.map((n) => [n.id, []]));
    for (const row of stmt.all(...networks.map((n) => n.id)) as Array<Row & { parent_id: string }>) {
      subnetsOf.get(row.parent_id)!.push({ id: row.id, cidr: (JSON.parse(row.spec) as { cidr: string }).cidr });
    }
  }
  sendJson(res, 200, {
    data: {
      project: {
        id: project.id,
        name: project.title,
        networks: networks.map((n) => ({
          id: n.id,
          title: (JSON.parse(n.spec) as { title: string }).title,
          subnets: subnetsOf.get(n.id) ?? [],
        })),
      },
    },
  });
}

const webhookDb = new SQLite(path.join(args['data-dir']!, 'baseline.sqlite'));
webhookDb.pragma('journal_mode = WAL');
webhookDb.pragma(`synchronous = ${args.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
webhookDb.exec(
  `create table if not exists notifications (auth_req_id text primary key, payload text not null, received_at integer not null)`,
);
const insertNotification = webhookDb.prepare(
  `insert into notifications (auth_req_id, payload, received_at) values (?, ?, ?) on conflict do nothing`,
);

async function webhook(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  if (req.headers.authorization !== notificationAuth) {
    sendJson(res, 401, { error: 'invalid_token', error_description: 'bad notification token' });
    return;
  }
  const text = await readBody(req);
  const body = JSON.parse(text) as { auth_req_id?: unknown };
  if (typeof body.auth_req_id !== 'string' || !body.auth_req_id) {
    sendJson(res, 400, { error: 'invalid_request', error_description: 'auth_req_id is required' });
    return;
  }
  insertNotification.run(body.auth_req_id, text, Date.now());
  res.writeHead(204);
  res.end();
}

const routes: Record<string, Route> = {
  '/mutation': mutation,
  '/query': query,
  '/webhook': webhook,
};

serveRoutes(routes, () => {
  webhookDb.close();
  gatewayDb?.close();
});
