/**
 * In-process CPU per POST /graphql with and without cached plans (decision 035): two gateways in this process
 * (sandbox upstreams, SQLite NORMAL), the same requests through each one's request handler with an in-memory
 * request and response (no sockets), one at a time, CPU from process.cpuUsage. Alternating rounds.
 *
 *   npx tsx bench/experiments/direct-path-micro.ts [operations per round] [rounds] [kinds, e.g. light,tree,mutation] [paths, e.g. apollo,plans]
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';

import { loadConfig } from '../../src/config/index.js';
import type { Gateway } from '../../src/gateway/options.js';
import { startGateway } from '../../src/gateway/start.js';
import { createLogger } from '../../src/logger.js';

const KEY = 'micro-key';
const N = Number(process.argv[2] ?? 5000);
const ROUNDS = Number(process.argv[3] ?? 3);

class FakeRes extends EventEmitter {
  statusCode = 200;
  headersSent = false;
  headers: Record<string, unknown> = {};
  body = '';
  setHeader(k: string, v: unknown) {
    this.headers[k.toLowerCase()] = v;
  }
  getHeader(k: string) {
    return this.headers[k.toLowerCase()];
  }
  writeHead(status: number, headers: Record<string, unknown> = {}) {
    this.statusCode = status;
    for (const [k, v] of Object.entries(headers)) this.setHeader(k, v);
    this.headersSent = true;
  }
  write(chunk: string) {
    this.body += chunk;
  }
  end(chunk?: string) {
    if (chunk) this.body += chunk;
    this.headersSent = true;
    this.emit('finish');
  }
  destroy() {}
}

function call(handler: (req: IncomingMessage, res: ServerResponse) => void, body: string): Promise<FakeRes> {
  const req = Readable.from([Buffer.from(body)]) as unknown as IncomingMessage & {
    method: string;
    url: string;
    headers: Record<string, string>;
  };
  req.method = 'POST';
  req.url = '/graphql';
  req.headers = {
    'content-type': 'application/json',
    authorization: `Bearer ${KEY}`,
    'content-length': String(Buffer.byteLength(body)),
  };
  const res = new FakeRes();
  return new Promise((resolve) => {
    res.once('finish', () => resolve(res));
    handler(req, res as unknown as ServerResponse);
  });
}

async function start(
  plans: boolean,
): Promise<{ gateway: Gateway; handler: (req: IncomingMessage, res: ServerResponse) => void }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'micro-plans-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    GATEWAY_API_KEYS: KEY,
    LOG_LEVEL: 'warn',
    SQLITE_SYNCHRONOUS: 'NORMAL',
    SANDBOX_CALLBACK_DELAY_MS: '50',
  });
  const logger = createLogger({ level: 'warn', destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const gateway = await startGateway(config, { port: 0, host: '127.0.0.1', logger, testing: { directPath: plans } });
  const handler = gateway.server.listeners('request')[0] as (req: IncomingMessage, res: ServerResponse) => void;
  return { gateway, handler };
}

async function gql(
  handler: Parameters<typeof call>[0],
  query: string,
  variables: Record<string, unknown>,
): Promise<any> {
  const res = await call(handler, JSON.stringify({ query, variables }));
  const json = JSON.parse(res.body);
  if (json.errors) throw new Error(JSON.stringify(json.errors));
  return json.data;
}

async function seed(handler: Parameters<typeof call>[0]): Promise<string> {
  const p = await gql(
    handler,
    'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
    { input: { name: 'tree' } },
  );
  const projectId = p.createProject.project.id as string;
  for (let n = 0; n < 7; n++) {
    const net = await gql(
      handler,
      'mutation($input: CreateNetworkInput!) { createNetwork(input: $input) { network { id } } }',
      { input: { projectId, title: `net-${n}` } },
    );
    for (let s = 0; s < 6; s++) {
      await gql(handler, 'mutation($input: CreateSubnetInput!) { createSubnet(input: $input) { subnet { id } } }', {
        input: { projectId, networkId: net.createNetwork.network.id, title: `s-${n}-${s}`, cidr: `10.${n}.${s}.0/24` },
      });
    }
  }
  return projectId;
}

const TREE = 'query($id: ID!) { project(id: $id) { id name networks { id title subnets { id cidr } } } }';
const MUTATION =
  'mutation($input: CreateNetworkInput!, $key: UUID) { createNetwork(input: $input, idempotencyKey: $key) { network { id title } idempotencyKey replayed } }';
const LIGHT = 'query($id: ID!) { project(id: $id) { id name } }';

async function measure(handler: Parameters<typeof call>[0], bodies: () => string, n: number): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const res = await call(handler, bodies());
    if (res.statusCode !== 200) throw new Error(res.body);
  }
  const d = process.cpuUsage(before);
  return (d.user + d.system) / n;
}

const KINDS = (process.argv[4] ?? 'tree,light,mutation').split(',');
const PATHS = (process.argv[5] ?? 'apollo,plans').split(',');
const targets = await Promise.all(PATHS.map(async (name) => ({ name, ...(await start(name === 'plans')) })));
const projects = new Map<string, string>();
for (const t of targets) projects.set(t.name, await seed(t.handler));
const kinds = {
  tree: (p: string) => () => JSON.stringify({ query: TREE, variables: { id: p } }),
  light: (p: string) => () => JSON.stringify({ query: LIGHT, variables: { id: p } }),
  mutation: (p: string) => () =>
    JSON.stringify({ query: MUTATION, variables: { input: { projectId: p, title: 'n' }, key: randomUUID() } }),
};
const results: Record<string, Record<string, number[]>> = {};
for (const [kind, make] of Object.entries(kinds).filter(([k]) => KINDS.includes(k))) {
  for (const t of targets) await measure(t.handler, make(projects.get(t.name)!), Math.min(500, N)); // warm-up
  for (let r = 0; r < ROUNDS; r++) {
    for (const t of r % 2 ? [...targets].reverse() : targets) {
      const n = kind === 'mutation' ? Math.ceil(N / 5) : N;
      const us = await measure(t.handler, make(projects.get(t.name)!), n);
      ((results[kind] ??= {})[t.name] ??= []).push(us);
    }
  }
  const line = targets
    .map((t) => `${t.name} ${results[kind]![t.name]!.map((u) => u.toFixed(1)).join('/')} µs`)
    .join('  ·  ');
  console.log(`${kind}: ${line}`);
}
for (const t of targets) await t.gateway.close();
