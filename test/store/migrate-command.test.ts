// `main.js migrate` (the migration Job of deploy/kubernetes/overlays/replicas) and DATABASE_MIGRATIONS=wait (its
// Deployment's pods): the Job applies the migrations once, the pods apply none and wait for it.
import { spawn } from 'node:child_process';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { migrationProvider } from '../../src/store/migrations.js';
import { tempDataDir } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { gatewayProcesses } from '../helpers/process.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const start = gatewayProcesses();

interface Exit {
  code: number | null;
  output: string;
}

/**
 * Runs `node src/main.ts <command>`, `migrate` by default (what the image runs as `node dist/src/main.js migrate`), and
 * waits for its exit.
 */
function runMigrate(env: Record<string, string>, command = 'migrate'): Promise<Exit> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', command], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

/** The names of the migrations applied to the database at `url` (none when kysely's table is not there yet). */
async function appliedMigrations(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const table = await client.query<{ t: string | null }>(`select to_regclass('public.kysely_migration')::text as t`);
    if (table.rows[0]!.t === null) return [];
    const rows = await client.query<{ name: string }>('select name from kysely_migration order by name');
    return rows.rows.map((r) => r.name);
  } finally {
    await client.end();
  }
}

const RELEASE_MIGRATIONS = Object.keys(await migrationProvider('postgres').getMigrations()).sort();

describe('main.js migrate on SQLite, and a command main.js does not know (exit codes, docs/operations.md)', () => {
  it('migrate exits 0 on a new DATA_DIR, and 1 naming DATA_DIR on a database migrated by a newer release', async () => {
    const dataDir = tempDataDir('migrate-sqlite-');
    const run = await runMigrate({ DATA_DIR: dataDir });
    expect(run.code, run.output).toBe(0);
    const db = new SQLite(path.join(dataDir, 'gateway.sqlite'));
    db.prepare(
      `insert into kysely_migration (name, timestamp) values ('999_from_a_newer_release', '2030-01-01')`,
    ).run();
    db.close();
    const refused = await runMigrate({ DATA_DIR: dataDir });
    expect(refused.code, refused.output).toBe(1);
    expect(refused.output).toContain('DATA_DIR');
    expect(refused.output).toContain('999_from_a_newer_release');
  }, 60_000);

  it('an unknown command exits 2 naming it, and serves nothing', async () => {
    const run = await runMigrate({ DATA_DIR: tempDataDir('unknown-command-') }, 'migrat');
    expect(run.code, run.output).toBe(2);
    expect(run.output).toContain('unknown command "migrat"');
    expect(run.output).not.toContain('gateway ready');
  });
});

describe('main.js migrate and DATABASE_MIGRATIONS=wait on a real PostgreSQL', () => {
  let server: TestPostgres;
  beforeAll(async () => {
    server = await startPostgres();
  }, 120_000);
  afterAll(() => server?.stop());

  it('migrate applies every migration of the release to an empty database and exits 0 without serving', async () => {
    const url = await server.createDatabase('migrate_once');
    expect(await appliedMigrations(url)).toEqual([]);
    const run = await runMigrate({ DATABASE_URL: url });
    expect(run.code, run.output).toBe(0);
    expect(run.output).toContain('the database has every migration of this release');
    expect(run.output).not.toContain('gateway ready');
    expect(await appliedMigrations(url)).toEqual(RELEASE_MIGRATIONS);
    // A second run (the Job of the next apply, with nothing new) finds nothing to do and still succeeds.
    const again = await runMigrate({ DATABASE_URL: url });
    expect(again.code, again.output).toBe(0);
    expect(again.output).not.toContain('migration applied');
  }, 120_000);

  it('migrate needs only the database: it ignores the gateway settings a Job is not given, and refuses a bad DATABASE_URL', async () => {
    // An apps file that does not exist would stop the gateway's start-up; the migration Job does not read it.
    const url = await server.createDatabase('migrate_only_database');
    const run = await runMigrate({
      DATABASE_URL: url,
      GATEWAY_APPS_FILE: '/no/such/apps.yaml',
      CLOUD_API_URL: 'https://cloud.example',
    });
    expect(run.code, run.output).toBe(0);
    const bad = await runMigrate({ DATABASE_URL: 'mysql://user:pa55-Zq81@db/gateway' });
    expect(bad.code).toBe(2);
    expect(bad.output).toContain('DATABASE_URL');
    expect(bad.output).not.toContain('pa55-Zq81');
  }, 120_000);

  it('a replica with DATABASE_MIGRATIONS=wait applies none, is alive but not ready, and serves once migrate has run', async () => {
    const url = await server.createDatabase('migrate_wait');
    const gateway = await start({ DATABASE_URL: url, DATABASE_MIGRATIONS: 'wait' }, { until: 'listening: not ready' });
    await gateway.waitFor('the database lacks migrations');
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
    const notReady = await fetch(`${gateway.url}/readyz`);
    expect(notReady.status).toBe(503);
    const body = (await notReady.json()) as { status: string; error: string };
    expect(body.status).toBe('starting');
    expect(body.error).toContain('waiting for migrations');
    expect(body.error).toContain('main.js migrate');
    expect(await appliedMigrations(url)).toEqual([]);

    const run = await runMigrate({ DATABASE_URL: url });
    expect(run.code, run.output).toBe(0);
    await gateway.waitFor('gateway ready');
    const ready = await fetch(`${gateway.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(gateway.output()).not.toContain('migration applied');
  }, 120_000);

  it('a replica waiting for migrate shuts down on SIGTERM: one line, exit 0, and still no migration applied', async () => {
    const url = await server.createDatabase('migrate_wait_sigterm');
    const gateway = await start({ DATABASE_URL: url, DATABASE_MIGRATIONS: 'wait' }, { until: 'listening: not ready' });
    await gateway.waitFor('the database lacks migrations');
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      gateway.child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    gateway.child.kill('SIGTERM');
    expect(await exited, gateway.output()).toEqual({ code: 0, signal: null });
    expect(gateway.output()).toContain('shutting down during the start: it stops, and what it opened is closed');
    expect(gateway.output()).toContain('shutdown complete');
    expect(await appliedMigrations(url)).toEqual([]);
  }, 120_000);

  it('DATABASE_MIGRATIONS=wait without DATABASE_URL is a configuration error', () => {
    expect(() => loadConfig({ DATABASE_MIGRATIONS: 'wait' })).toThrow(/DATABASE_MIGRATIONS.*set DATABASE_URL/);
    expect(loadConfig({}).databaseMigrations).toBe('apply');
  });
});
