// Vitest globalSetup: when PostgreSQL cannot run here, the whole run stops before any test, saying why and
// what to do, instead of the PostgreSQL tests failing one by one in their hooks.
import { preparePostgres } from '../../scripts/embedded-postgres.js';

export default async function preflight(): Promise<void> {
  await preparePostgres();
}
