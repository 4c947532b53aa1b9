import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { request } from 'undici';
import { afterEach } from 'vitest';

import { ConfigError, loadConfig } from '../../src/config/index.js';
import type { Gateway, GatewayOptions } from '../../src/gateway/options.js';
import { startGateway } from '../../src/gateway/start.js';
import { createLogger } from '../../src/logger.js';

export interface GraphQLResponse<T = Record<string, any>> {
  status: number;
  data?: T | null;
  errors?: Array<{ message: string; path?: (string | number)[]; extensions?: Record<string, any> }>;
}

export interface TestGateway {
  gateway: Gateway;
  url: string;
  dataDir: string;
  /** Every log line the gateway wrote, as text (for asserting that secrets are absent). */
  logs(): string;
  /** POST /graphql with JSON; `key` sends Authorization: Bearer <key>. */
  graphql<T = Record<string, any>>(
    query: string,
    variables?: Record<string, unknown>,
    options?: { key?: string; headers?: Record<string, string> },
  ): Promise<GraphQLResponse<T>>;
  close(): Promise<void>;
}

/** The gateway's log lines, parsed, that `keep` keeps. */
export function logLines<T>(gw: Pick<TestGateway, 'logs'>, keep: (line: T) => boolean): T[] {
  return gw
    .logs()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as T)
    .filter(keep);
}

export function tempDataDir(prefix = 'gateway-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * A GATEWAY_APPS_FILE in a fresh data directory: each app with its name, its scopes, the apps whose plans it approves
 * when it names them (`approves`), and its one key (stored as its SHA-256, as the file keeps keys). Returns its path.
 */
export function appsFile(
  prefix: string,
  apps: ReadonlyArray<{ name: string; scopes: string[]; approves?: string[]; key: string }>,
): string {
  const sha = (key: string) => createHash('sha256').update(key).digest('hex');
  const file = path.join(tempDataDir(prefix), 'apps.yaml');
  const entries = apps.map(
    (a) =>
      `  - name: ${a.name}\n    scopes: [${a.scopes.join(', ')}]\n` +
      (a.approves ? `    approves: [${a.approves.join(', ')}]\n` : '') +
      `    keys: [{ sha256: ${sha(a.key)} }]\n`,
  );
  fs.writeFileSync(file, `apps:\n${entries.join('')}`);
  return file;
}

/**
 * Starts a real gateway on 127.0.0.1 port 0 with the sandbox upstreams (unless env says otherwise), SQLite in
 * a fresh temporary DATA_DIR (or the one given), and its logs captured in memory.
 */
export async function startTestGateway(
  env: Record<string, string> = {},
  options: GatewayOptions = {},
): Promise<TestGateway> {
  const dataDir = env.DATA_DIR ?? tempDataDir();
  // SQLITE_WAL_PREALLOCATE off unless a test sets it: every test gateway opens a new database, and writing its WAL
  // ahead (~300 MB, seconds) would only make the suite slower; test/store/wal-preallocate.test.ts tests it.
  const config = loadConfig({
    LOG_LEVEL: 'debug',
    SANDBOX_CALLBACK_DELAY_MS: '50',
    SQLITE_WAL_PREALLOCATE: 'false',
    ...env,
    DATA_DIR: dataDir,
  });
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  const logger = createLogger({ level: config.logLevel, destination });
  const gateway = await startGateway(config, { port: 0, host: '127.0.0.1', logger, ...options });
  return {
    gateway,
    url: gateway.url,
    dataDir,
    logs: () => lines.join(''),
    async graphql(query, variables, opts = {}) {
      const res = await request(`${gateway.url}/graphql`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
          ...(opts.headers ?? {}),
        },
        body: JSON.stringify({ query, variables }),
      });
      const body = (await res.body.json()) as Omit<GraphQLResponse, 'status'>;
      return { status: res.statusCode, ...body } as GraphQLResponse<any>;
    },
    close: () => gateway.close(),
  };
}

/**
 * For a test file whose tests each start their own gateways: returns a `start(env)` that starts one and
 * registers it to be closed after the test. Call it at the top level of the file.
 */
export function gatewaysPerTest(): (env?: Record<string, string>, options?: GatewayOptions) => Promise<TestGateway> {
  const started: TestGateway[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((g) => g.close()));
  });
  return async (env = {}, options = {}) => {
    const gw = await startTestGateway(env, options);
    started.push(gw);
    return gw;
  };
}

/** The message of the ConfigError with which `env` stops start-up (any other outcome fails the test). */
export function configRefusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error('start-up was not stopped');
}
