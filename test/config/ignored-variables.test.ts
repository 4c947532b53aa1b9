import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { gatewayProcesses } from '../helpers/process.js';

const spawnGateway = gatewayProcesses();

interface LogLine {
  level: number;
  msg: string;
  variable?: string;
}

/** The gateway's warnings about a variable it ignores, once it is ready: the JSON lines at warn (40) naming one. */
async function ignoredWarnings(env: Record<string, string>): Promise<{ warnings: LogLine[]; output: string }> {
  const gateway = await spawnGateway({ DATA_DIR: tempDataDir(), ...env });
  const output = gateway.output();
  const lines = output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
  return { warnings: lines.filter((l) => l.level === 40 && l.variable !== undefined), output };
}

describe('a variable the gateway ignores is named once in a warning at start-up, never its value', () => {
  it('says nothing when every variable set has its effect', async () => {
    const { warnings } = await ignoredWarnings({ SQLITE_SYNCHRONOUS: 'FULL', SQLITE_CLAIM_WITHOUT_SYNC: 'false' });
    expect(warnings).toEqual([]);
  });

  it("an upstream address's user name and password: not sent, so the warning names the credential that is", async () => {
    const { warnings, output } = await ignoredWarnings({
      GATEWAY_API_KEYS: 'shop:key-of-the-shop-123',
      SANDBOX_UPSTREAMS: 'mobile-id',
      CLOUD_API_URL: 'http://cloud-user:pw-cloud-1a@127.0.0.1:9/cloud',
      CLOUD_API_TOKEN: 'cloud-token-7b',
      VERIFICATION_API_URL: 'http://verify-user:pw-verify-2b@127.0.0.1:9',
      VERIFICATION_API_TOKEN: 'verify-token-8c',
      IDENTIFICATION_API_URL: 'http://:pw-ident-3c@127.0.0.1:9',
      IDENTIFICATION_API_TOKEN: 'ident-token-9d',
      IDENTIFICATION_PRODLIKE_API_URL: 'http://prodlike-user@127.0.0.1:9',
      RFM_API_URL: 'http://rfm-user:pw-rfm-4d@127.0.0.1:9',
    });
    const credentialOf = {
      CLOUD_API_URL: 'CLOUD_API_TOKEN or CLOUD_API_CREDENTIALS',
      VERIFICATION_API_URL: 'VERIFICATION_API_TOKEN',
      IDENTIFICATION_API_URL: 'IDENTIFICATION_API_TOKEN',
      IDENTIFICATION_PRODLIKE_API_URL: 'IDENTIFICATION_PRODLIKE_API_TOKEN',
      RFM_API_URL: 'VERIFICATION_API_TOKEN',
    };
    expect(warnings.map((w) => w.variable).sort()).toEqual(Object.keys(credentialOf).sort());
    for (const [variable, credential] of Object.entries(credentialOf)) {
      const warning = warnings.find((w) => w.variable === variable)!;
      expect(warning.msg).toContain(`${variable}: the user name and password in it are not sent`);
      expect(warning.msg).toContain(`its credential is ${credential}`);
    }
    for (const secret of ['pw-cloud-1a', 'pw-verify-2b', 'pw-ident-3c', 'pw-rfm-4d', 'cloud-token-7b', 'prodlike-user'])
      expect(output).not.toContain(secret);
  });

  it('the settings of PostgreSQL without DATABASE_URL, and SQLITE_CLAIM_WITHOUT_SYNC with SQLITE_SYNCHRONOUS=NORMAL', async () => {
    const { warnings } = await ignoredWarnings({
      STORE_PG_NAMED_STATEMENTS: 'false',
      EVENT_NOTIFY_GROUPED: 'true',
      EVENT_ORDER_PROBE_GROUPED: 'false',
      SQLITE_SYNCHRONOUS: 'NORMAL',
      SQLITE_CLAIM_WITHOUT_SYNC: 'false',
    });
    expect(warnings.map((w) => [w.variable, w.msg])).toEqual([
      [
        'STORE_PG_NAMED_STATEMENTS',
        'STORE_PG_NAMED_STATEMENTS: ignored: DATABASE_URL is unset, and this is a setting of the PostgreSQL store',
      ],
      [
        'EVENT_NOTIFY_GROUPED',
        'EVENT_NOTIFY_GROUPED: ignored: DATABASE_URL is unset, and this is a setting of the PostgreSQL store',
      ],
      [
        'EVENT_ORDER_PROBE_GROUPED',
        'EVENT_ORDER_PROBE_GROUPED: ignored: DATABASE_URL is unset, and this is a setting of the PostgreSQL store',
      ],
      [
        'SQLITE_CLAIM_WITHOUT_SYNC',
        'SQLITE_CLAIM_WITHOUT_SYNC: ignored: SQLITE_SYNCHRONOUS is NORMAL, so no idempotency claim waits for a sync',
      ],
    ]);
  });

  describe('with DATABASE_URL', () => {
    let server: TestPostgres;
    beforeAll(async () => {
      server = await startPostgres();
    }, 120_000);
    afterAll(() => server?.stop());

    it('every setting of the embedded SQLite store, each once, and never the database password', async () => {
      const databaseUrl = await server.createDatabase('ignored_variables');
      const sqliteOnly = {
        SQLITE_SYNCHRONOUS: 'NORMAL',
        SQLITE_COMMIT_WINDOW_MS: '2',
        SQLITE_CLAIM_WITHOUT_SYNC: 'false',
        SQLITE_CHECKPOINT_INTERVAL_MS: '400',
        SQLITE_CHECKPOINT_SYNC: 'false',
        SQLITE_CHECKPOINT_NICE: '5',
        SQLITE_WAL_READ_AHEAD_MB: '0',
        SQLITE_CACHE_KIB: '2048',
        SQLITE_WAL_RESTART_FRAMES: '4096',
        SQLITE_WAL_PREALLOCATE: 'false',
      };
      const { warnings, output } = await ignoredWarnings({
        DATABASE_URL: databaseUrl,
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
        STORE_PG_NAMED_STATEMENTS: 'false',
        ...sqliteOnly,
      });
      expect(warnings.map((w) => w.variable).sort()).toEqual(Object.keys(sqliteOnly).sort());
      for (const w of warnings)
        expect(w.msg).toBe(
          `${w.variable}: ignored: DATABASE_URL is set, and this is a setting of the embedded SQLite store`,
        );
      const password = decodeURIComponent(new URL(databaseUrl).password);
      expect(output).not.toContain(password);
    }, 120_000);
  });
});
