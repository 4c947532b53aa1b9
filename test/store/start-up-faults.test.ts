// A store the gateway cannot open at start-up: the process exits with a message that names the variable to fix
// (DATA_DIR or DATABASE_URL) and never its secret, and changes nothing it cannot use. Real processes, real files,
// a real PostgreSQL (docs/operations.md, Migrations; docs/scaling.md).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { gatewayProcesses } from '../helpers/process.js';

const start = gatewayProcesses();
const KEY = 'c'.repeat(64);

/** Starts a gateway process that must not start: its exit code and what it wrote from its failure on. */
async function refused(env: Record<string, string>): Promise<{ code: string; output: string }> {
  const started = await start(env).then(
    (gw) => gw,
    (err: unknown) => err as Error,
  );
  if (!(started instanceof Error)) throw new Error(`the gateway started: ${started.line}`);
  const match = /^gateway exited \((\w+)\) before it was ready:\n([\s\S]*)$/.exec(started.message);
  if (!match) throw started;
  const output = match[2]!;
  const at = output.indexOf('gateway: failed to start');
  expect(at, output).toBeGreaterThanOrEqual(0);
  return { code: match[1]!, output: output.slice(at) };
}

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'start-up-faults-'));

/** Whether this process may mount a tmpfs (root in a container that allows it). */
function canMount(): boolean {
  const dir = tempDir();
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,ro', 'tmpfs', dir], { stdio: 'pipe' });
    execFileSync('umount', [dir], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('SQLite that cannot be opened at start-up (DATA_DIR)', () => {
  it('DATA_DIR naming a file, or a folder under a file: exit 1 naming DATA_DIR and the path', async () => {
    const file = path.join(tempDir(), 'not-a-folder');
    fs.writeFileSync(file, 'x');
    for (const dataDir of [file, path.join(file, 'data')]) {
      const run = await refused({ DATA_DIR: dataDir });
      expect(run.code).toBe('1');
      expect(run.output).toContain('DATA_DIR');
      expect(run.output).toContain(dataDir);
      expect(run.output).toContain('not a folder');
    }
    expect(fs.readFileSync(file, 'utf8')).toBe('x');
  }, 60_000);

  it('a gateway.sqlite that is not a SQLite database is refused naming DATA_DIR, and left as it was', async () => {
    const dataDir = tempDir();
    const file = path.join(dataDir, 'gateway.sqlite');
    const bytes = Buffer.from('these are not the pages of a SQLite database\n'.repeat(200));
    fs.writeFileSync(file, bytes);
    const run = await refused({ DATA_DIR: dataDir });
    expect(run.code).toBe('1');
    expect(run.output).toContain('DATA_DIR');
    expect(run.output).toContain(file);
    expect(run.output).toContain('not a SQLite database');
    expect(fs.readFileSync(file).equals(bytes)).toBe(true);
  }, 60_000);

  it('with SQLITE_WAL_PREALLOCATE, a gateway.sqlite that is not SQLite is refused before anything is written beside it', async () => {
    const dataDir = tempDir();
    const file = path.join(dataDir, 'gateway.sqlite');
    const bytes = Buffer.from('these are not the pages of a SQLite database\n'.repeat(200));
    fs.writeFileSync(file, bytes);
    // Every name created, changed or removed in the folder: SQLite removes at its close the WAL it was refused with.
    const touched: string[] = [];
    const watcher = fs.watch(dataDir, (_event, name) => touched.push(String(name)));
    try {
      const run = await refused({
        DATA_DIR: dataDir,
        SQLITE_WAL_PREALLOCATE: 'true',
        // The smallest WAL: what matters is whether one is written, not its size.
        SQLITE_WAL_RESTART_FRAMES: '1024',
      });
      expect(run.code).toBe('1');
      expect(run.output).toContain(file);
      expect(run.output).toContain('not a SQLite database');
      // A folder's events arrive in order: once the marker's has, every event of the gateway's run has too.
      const seen = new Promise<void>((resolve) => watcher.on('change', (_e, name) => name === 'marker' && resolve()));
      fs.writeFileSync(path.join(dataDir, 'marker'), '');
      await seen;
    } finally {
      watcher.close();
    }
    expect([...new Set(touched)]).toEqual(['marker']);
    fs.rmSync(path.join(dataDir, 'marker'));
    expect(fs.readdirSync(dataDir)).toEqual(['gateway.sqlite']);
    expect(fs.readFileSync(file).equals(bytes)).toBe(true);
  }, 60_000);

  it('a gateway.lock that is not SQLite is refused naming gateway.lock as removable, not gateway.sqlite', async () => {
    const dataDir = tempDir();
    const lock = path.join(dataDir, 'gateway.lock');
    const bytes = Buffer.from('not a lock\n'.repeat(100));
    fs.writeFileSync(lock, bytes);
    const run = await refused({ DATA_DIR: dataDir, TOKEN_ENCRYPTION_KEY: KEY });
    expect(run.code).toBe('1');
    expect(run.output).toContain('DATA_DIR');
    expect(run.output).toContain(`${lock} is not a SQLite database`);
    expect(run.output).toContain('remove');
    expect(run.output).not.toContain('gateway.sqlite is not');
    expect(fs.readFileSync(lock).equals(bytes)).toBe(true);
  }, 60_000);

  it.skipIf(!canMount())(
    'DATA_DIR on a read-only file system: exit 1 naming DATA_DIR as not writable',
    async () => {
      const dataDir = tempDir();
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,ro', 'tmpfs', dataDir]);
      try {
        const run = await refused({ DATA_DIR: dataDir });
        expect(run.code).toBe('1');
        expect(run.output).toContain('DATA_DIR');
        expect(run.output).toContain('writable');
      } finally {
        execFileSync('umount', [dataDir]);
      }
    },
    60_000,
  );

  it('a second gateway process on the DATA_DIR of a running one is refused naming DATA_DIR; the first serves on', async () => {
    const dataDir = tempDir();
    const first = await start({ DATA_DIR: dataDir, TOKEN_ENCRYPTION_KEY: KEY });
    const run = await refused({ DATA_DIR: dataDir, TOKEN_ENCRYPTION_KEY: KEY });
    expect(run.code).toBe('1');
    expect(run.output).toContain('DATA_DIR');
    expect(run.output).toContain('another gateway process');
    expect(run.output).toContain('DATABASE_URL');
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    // Once the first has stopped, the DATA_DIR is free again.
    first.child.kill('SIGTERM');
    await new Promise((resolve) => first.child.once('exit', resolve));
    const next = await start({ DATA_DIR: dataDir, TOKEN_ENCRYPTION_KEY: KEY });
    expect((await fetch(`${next.url}/readyz`)).status).toBe(200);
  }, 60_000);

  it('a database migrated by a newer release is refused naming DATA_DIR and the unknown migration', async () => {
    const dataDir = tempDir();
    const first = await start({ DATA_DIR: dataDir, TOKEN_ENCRYPTION_KEY: KEY });
    first.child.kill('SIGTERM');
    await new Promise((resolve) => first.child.once('exit', resolve));
    const { default: SQLite } = await import('better-sqlite3');
    const db = new SQLite(path.join(dataDir, 'gateway.sqlite'));
    db.prepare(
      `insert into kysely_migration (name, timestamp) values ('999_from_a_newer_release', '2030-01-01')`,
    ).run();
    db.close();
    const run = await refused({ DATA_DIR: dataDir, TOKEN_ENCRYPTION_KEY: KEY });
    expect(run.code).toBe('1');
    expect(run.output).toContain('DATA_DIR');
    expect(run.output).toContain('999_from_a_newer_release');
    expect(run.output).toContain('newer release');
    expect(run.output).not.toContain('corrupted');
  }, 60_000);
});

describe('PostgreSQL that cannot be used at start-up (DATABASE_URL)', () => {
  let server: TestPostgres;
  beforeAll(async () => {
    server = await startPostgres();
  }, 120_000);
  afterAll(() => server?.stop());

  it('three replicas started at once on a new database all serve, with every migration applied once', async () => {
    const url = await server.createDatabase('three_at_once');
    const replicas = await Promise.all([0, 1, 2].map(() => start({ DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: KEY })));
    for (const replica of replicas) expect((await fetch(`${replica.url}/readyz`)).status).toBe(200);
    const applied = replicas.flatMap((r) => r.output().match(/"migration":"\w+"/g) ?? []);
    expect(new Set(applied).size).toBe(applied.length);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: string }>('select count(*) as n from kysely_migration');
      expect(Number(rows[0]!.n)).toBe(applied.length);
    } finally {
      await client.end();
    }
  }, 120_000);

  it('a database migrated by a newer release is refused naming DATABASE_URL and the migration, never the password', async () => {
    const url = await server.createDatabase('newer_release');
    const first = await start({ DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: KEY });
    first.child.kill('SIGTERM');
    await new Promise((resolve) => first.child.once('exit', resolve));
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(
      `insert into kysely_migration (name, timestamp) values ('999_from_a_newer_release', '2030-01-01')`,
    );
    await client.end();
    const run = await refused({ DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: KEY });
    expect(run.code).toBe('1');
    expect(run.output).toContain('DATABASE_URL');
    expect(run.output).toContain('999_from_a_newer_release');
    expect(run.output).toContain('newer release');
    expect(run.output).not.toContain('corrupted');
    const password = new URL(url).password;
    if (password) expect(run.output).not.toContain(password);
  }, 120_000);

  it('a wrong password is refused at once naming DATABASE_URL, never the password', async () => {
    const url = new URL(await server.createDatabase('wrong_password'));
    url.password = 'Wr0ng-pa55-Zq81';
    const run = await refused({ DATABASE_URL: url.toString(), TOKEN_ENCRYPTION_KEY: KEY });
    expect(run.code).toBe('1');
    expect(run.output).toContain('DATABASE_URL');
    expect(run.output).toContain('password authentication failed');
    expect(run.output).not.toContain('Wr0ng-pa55-Zq81');
  }, 120_000);
});
