// PostgreSQL that answers but refuses (docs/contract.md, SERVICE_UNAVAILABLE: the gateway's own database could not be
// reached or written): writes refused while it is read-only (a standby reached after a failover, or a primary put
// read-only), and new connections refused while it has no slot left (max_connections, a role's CONNECTION LIMIT). Each
// is the database's to cure, and a retry then runs once: SERVICE_UNAVAILABLE with Retry-After, as when it is away, not
// INTERNAL_SERVER_ERROR; and a replica that starts meanwhile waits for it, as for a database that is not up yet.
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createProjectProbe } from '../helpers/faults.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification } from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { gatewayProcesses, type GatewayProcess } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

const { post, expectEachCreatesOnce, made } = createProjectProbe('pg-refusing');
const spawnGateway = gatewayProcesses();

describe('PostgreSQL that refuses writes or connections', () => {
  let pgServer: TestPostgres;
  /** A session of the server's superuser on the gateways' database, for the test's own statements. */
  let admin: pg.Client;
  let a: TestGateway;
  let b: TestGateway;
  const started: TestGateway[] = [];
  let shared: Record<string, string>;
  let superUrl: string;

  beforeAll(async () => {
    pgServer = await startPostgres();
    superUrl = await pgServer.createDatabase('refusing');
    admin = new pg.Client({ connectionString: superUrl });
    await admin.connect();
    // The test's own session stays writable whatever the server's default becomes.
    await admin.query('set default_transaction_read_only = off');
    // The gateways log in as a role of their own (as in production), which a CONNECTION LIMIT binds.
    const password = randomBytes(12).toString('hex');
    await admin.query(`create role gateway login password '${password}'`);
    await admin.query('alter database refusing owner to gateway');
    await admin.query('alter schema public owner to gateway');
    const url = new URL(superUrl);
    url.username = 'gateway';
    url.password = password;
    shared = { DATABASE_URL: url.toString(), TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex') };
    a = await startTestGateway(shared);
    b = await startTestGateway(shared);
    started.push(a, b);
  }, 120_000);
  afterAll(async () => {
    for (const gw of started) await gw.close();
    await admin?.end();
    await pgServer?.stop();
  });

  /** The creation at `gw` is SERVICE_UNAVAILABLE, 503 with Retry-After, and nothing of the driver's words. */
  async function expectUnavailable(gw: TestGateway, key: string, words: string[]): Promise<void> {
    const res = await post(gw, key);
    expect(res.status, res.raw).toBe(503);
    expect(res.retryAfter).toBe('5');
    expect(res.body.errors[0].extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfter: 5 });
    for (const raw of words) expect(res.raw).not.toContain(raw);
  }

  it('read-only: a creation and a webhook are SERVICE_UNAVAILABLE; once writable, a retry on the other replica creates once', async () => {
    const key = randomUUID();
    await admin.query('alter system set default_transaction_read_only = on');
    await admin.query('select pg_reload_conf()');
    // Once a new session reads it, the server has reloaded and told every session, the gateways' among them.
    // Once a new session reads it, the server has reloaded and told every session, the gateways' among them.
    await waitFor(
      async () => {
        const probe = new pg.Client({ connectionString: superUrl });
        await probe.connect();
        try {
          return (
            (await probe.query<{ v: string }>("select current_setting('default_transaction_read_only') as v")).rows[0]!
              .v === 'on'
          );
        } finally {
          await probe.end();
        }
      },
      20_000,
      'the server read-only',
    );
    try {
      await expectUnavailable(a, key, ['read-only', 'INSERT']);
      const hook = await postNotification(a, {
        auth_req_id: `pg-read-only-${randomUUID()}`,
        error: 'access_denied',
        error_description: 'the user declined',
      });
      expect(hook.status, hook.text).toBe(503);
      expect(hook.json).toMatchObject({ error: 'temporarily_unavailable' });
      expect(hook.headers['retry-after']).toBe('5');
    } finally {
      await admin.query('alter system reset default_transaction_read_only');
      await admin.query('select pg_reload_conf()');
    }
    expect(made(a)).toHaveLength(0);
    await waitFor(async () => (await post(b, randomUUID())).status === 200, 20_000, 'the server writable again');
    await expectEachCreatesOnce([[b, key]]);
  }, 120_000);

  it('no connection slot left: a creation is SERVICE_UNAVAILABLE, and a replica started meanwhile waits until one frees', async () => {
    const key = randomUUID();
    await admin.query('alter role gateway connection limit 0');
    let c: GatewayProcess;
    try {
      await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where usename = 'gateway'`);
      await waitFor(
        async () =>
          (await admin.query(`select 1 from pg_stat_activity where usename = 'gateway'`)).rowCount === 0 &&
          a.logs().includes('a PostgreSQL connection failed'),
        20_000,
        "the gateways' sessions ended",
      );
      // Each creation needs a connection the server refuses (the pool's were ended with their sessions).
      for (let i = 0; i < 3; i++) await expectUnavailable(a, key, ['too many connections', 'for role']);
      // The operator reads why (the LISTEN connection's reconnections say it).
      await waitFor(() => a.logs().includes('too many connections'), 20_000, 'the refusal in the log');

      // A replica that starts meanwhile (a process of its own) waits with its port open, as for a database not up yet.
      c = await spawnGateway(shared, { until: 'listening: not ready' });
      const child = c.child;
      const exited = new Promise<string>((resolve) => child.once('exit', (code) => resolve(`exited ${code}`)));
      const waiting = c.waitFor('PostgreSQL is not reachable: waiting for it, retrying with backoff');
      expect(await Promise.race([waiting.then(() => 'waiting'), exited]), c.output()).toBe('waiting');
      const ready = await request(`${c.url}/readyz`);
      expect(ready.statusCode).toBe(503);
      await ready.body.dump();
      expect(c.child.exitCode).toBeNull();
    } finally {
      await admin.query('alter role gateway connection limit -1');
    }
    await c.waitFor('gateway ready');
    expect(made(a)).toHaveLength(0);
    await expectEachCreatesOnce([[a, key]]);
  }, 120_000);
});
